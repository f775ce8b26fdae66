//! `receivers.<id>`: [`ReceiverSpec`].

use crate::config::{ConfigError, component_type, typed};
use profilink_receiver::{OtlpGrpcConfig, OtlpHttpConfig, SentryReceiverConfig};
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::collections::BTreeMap;

/// A receiver's typed config.
#[derive(Debug, Clone, PartialEq)]
pub enum ReceiverSpec {
    /// `otlp`: gRPC and/or HTTP (at least one).
    Otlp {
        /// `protocols.grpc`, when enabled.
        grpc: Option<OtlpGrpcConfig>,
        /// `protocols.http`, when enabled.
        http: Option<OtlpHttpConfig>,
    },
    /// `sentry`: the envelope endpoint.
    Sentry(SentryReceiverConfig),
}

fn err(msg: String) -> ConfigError {
    ConfigError(msg)
}

/// Reads the files of a receiver's `tls` at `at` (`receivers.otlp.protocols.grpc`).
fn check_server_tls(
    at: &str,
    tls: Option<&profilink_receiver::TlsConfig>,
) -> Result<(), ConfigError> {
    match tls {
        Some(t) => t.check().map_err(|e| err(format!("{at}.{e}"))),
        None => Ok(()),
    }
}

/// Reads `receivers.<id>`.
pub fn read_receiver(id: &str, value: &Value) -> Result<ReceiverSpec, ConfigError> {
    let at = format!("receivers.{id}");
    match component_type(id) {
        "otlp" => {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Otlp {
                #[serde(default)]
                protocols: BTreeMap<String, Value>,
            }
            let o: Otlp = typed(value, &at)?;
            let mut grpc = None;
            let mut http = None;
            for (name, v) in &o.protocols {
                let path = format!("{at}.protocols.{name}");
                match name.as_str() {
                    "grpc" => {
                        let c = typed::<OtlpGrpcConfig>(v, &path)?;
                        check_server_tls(&path, c.tls.as_ref())?;
                        grpc = Some(c);
                    }
                    "http" => {
                        let c = typed::<OtlpHttpConfig>(v, &path)?;
                        check_server_tls(&path, c.tls.as_ref())?;
                        http = Some(c);
                    }
                    other => {
                        return Err(err(format!(
                            "{path}: unknown protocol {other:?} (known: grpc, http)"
                        )));
                    }
                }
            }
            if grpc.is_none() && http.is_none() {
                return Err(err(format!(
                    "{at}.protocols: at least one of grpc, http is required"
                )));
            }
            Ok(ReceiverSpec::Otlp { grpc, http })
        }
        "sentry" => {
            let c: SentryReceiverConfig = typed(value, &at)?;
            check_server_tls(&at, c.tls.as_ref())?;
            Ok(ReceiverSpec::Sentry(c))
        }
        other => Err(err(format!(
            "{at}: receiver type {other:?} is not available in this version of profilink"
        ))),
    }
}
