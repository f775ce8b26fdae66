//! `receivers.<id>`: [`ReceiverSpec`].
//!
//! `pprof` takes the Collector contrib `pprofreceiver`'s modes (`server`, `remote`, `file`;
//! `self` is refused with the reason); `pyroscope` serves Alloy's `pyroscope.receive_http`
//! doors.

use crate::config::{ConfigError, component_type, typed};
use profilink_exporter::ForwardConfig;
use profilink_receiver::{
    OtlpGrpcConfig, OtlpHttpConfig, PprofReceiverConfig, PyroscopeReceiverConfig,
    SentryReceiverConfig,
};
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::collections::BTreeMap;

/// A receiver's typed config.
#[derive(Debug, Clone, PartialEq)]
// One value per configured receiver, read once at start: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
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
    /// `kafka`: a consumer group member reading OTLP messages.
    Kafka(profilink_kafka::KafkaReceiverConfig),
    /// `pprof`: pushed (`server`), scraped (`remote`) or read (`file`) pprof profiles.
    Pprof(PprofReceiverConfig),
    /// `pyroscope`: the Pyroscope SDKs' doors (`/ingest`, the push API).
    Pyroscope(PyroscopeReceiverConfig),
}

/// Reads the files of a receiver's `tls` at `at` (`receivers.otlp.protocols.grpc`).
fn check_server_tls(
    at: &str,
    tls: Option<&profilink_receiver::TlsConfig>,
) -> Result<(), ConfigError> {
    match tls {
        Some(t) => t.check().map_err(|e| ConfigError::tls(at, e)),
        None => Ok(()),
    }
}

/// A protocol's section without the Collector's `include_metadata` (checked to be a boolean):
/// it makes client metadata (headers) available to the pipeline, and nothing in profilink reads
/// client metadata, so it has no effect either way.
fn without_include_metadata(value: &Value, path: &str) -> Result<Value, ConfigError> {
    let mut value = value.clone();
    if let Some(map) = value.as_mapping_mut()
        && let Some(v) = map.remove("include_metadata")
    {
        typed::<bool>(&v, &format!("{path}.include_metadata"))?;
    }
    Ok(value)
}

/// `bearer_token` is the shorthand of an `auth` with one token: not both.
fn check_one_auth(at: &str, bearer_token: bool, auth: bool) -> Result<(), ConfigError> {
    if bearer_token && auth {
        return Err(ConfigError::at(
            format!("{at}.bearer_token"),
            "set either bearer_token or auth, not both",
        ));
    }
    Ok(())
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
                        let v = without_include_metadata(v, &path)?;
                        let c = typed::<OtlpGrpcConfig>(&v, &path)?;
                        check_server_tls(&path, c.tls.as_ref())?;
                        check_one_auth(&path, c.bearer_token.is_some(), c.auth.is_some())?;
                        grpc = Some(c);
                    }
                    "http" => {
                        let v = without_include_metadata(v, &path)?;
                        let c = typed::<OtlpHttpConfig>(&v, &path)?;
                        check_server_tls(&path, c.tls.as_ref())?;
                        check_one_auth(&path, c.bearer_token.is_some(), c.auth.is_some())?;
                        if let Some(cors) = &c.cors {
                            cors.validate()
                                .map_err(|e| ConfigError::line(format!("{path}.cors.{e}")))?;
                        }
                        http = Some(c);
                    }
                    other => {
                        return Err(ConfigError::at(
                            path,
                            format!("unknown protocol {other:?} (known: grpc, http)"),
                        ));
                    }
                }
            }
            if grpc.is_none() && http.is_none() {
                return Err(ConfigError::at(
                    format!("{at}.protocols"),
                    "at least one of grpc, http is required",
                ));
            }
            Ok(ReceiverSpec::Otlp { grpc, http })
        }
        "sentry" => {
            if value.as_mapping().is_some_and(|m| m.contains_key("auth")) {
                return Err(ConfigError::at(
                    format!("{at}.auth"),
                    "not available on the sentry receiver: Sentry SDKs authenticate with their \
                     DSN's public key (limit the keys with allowed_keys)",
                ));
            }
            let c: SentryReceiverConfig = typed(value, &at)?;
            if let Some(u) = &c.upstream {
                read_upstream(&at, u)?;
            }
            check_server_tls(&at, c.tls.as_ref())?;
            Ok(ReceiverSpec::Sentry(c))
        }
        "kafka" => {
            let c: profilink_kafka::KafkaReceiverConfig = typed(value, &at)?;
            c.check().map_err(|e| match e.split_once(": ") {
                Some((key, problem)) => ConfigError::at(format!("{at}.{key}"), problem),
                None => ConfigError::at(at.clone(), e),
            })?;
            Ok(ReceiverSpec::Kafka(c))
        }
        "pprof" => {
            if value.as_mapping().is_some_and(|m| m.contains_key("self")) {
                return Err(ConfigError::at(
                    format!("{at}.self"),
                    "not available: profilink is not a Go process (its own CPU profile is the \
                     pprof extension's)",
                ));
            }
            let c: PprofReceiverConfig = typed(value, &at)?;
            c.check().map_err(|e| match e.split_once(": ") {
                Some((key, problem)) => ConfigError::at(format!("{at}.{key}"), problem),
                None => ConfigError::at(at.clone(), e),
            })?;
            if let Some(server) = &c.server {
                check_server_tls(&format!("{at}.server"), server.tls.as_ref())?;
            }
            Ok(ReceiverSpec::Pprof(c))
        }
        "pyroscope" => {
            let c: PyroscopeReceiverConfig = typed(value, &at)?;
            check_server_tls(&at, c.tls.as_ref())?;
            Ok(ReceiverSpec::Pyroscope(c))
        }
        other => Err(ConfigError::at(
            at,
            format!("receiver type {other:?} is not available in this version of profilink"),
        )),
    }
}

/// Types and checks `receivers.<id>.upstream`; the error names the key.
pub fn read_upstream(at: &str, value: &serde_json::Value) -> Result<ForwardConfig, ConfigError> {
    let cfg: ForwardConfig = serde_json::from_value(value.clone())
        .map_err(|e| ConfigError::at(format!("{at}.upstream"), e.to_string()))?;
    // `validate` names a key under `upstream`.
    cfg.validate()
        .map_err(|e| ConfigError::at(format!("{at}.upstream.{}", e.key), e.message))?;
    cfg.tls
        .check()
        .map_err(|e| ConfigError::tls(&format!("{at}.upstream"), e))?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn pprof_and_pyroscope_receivers_read_with_errors_naming_the_key() {
        let v = |y: &str| serde_yaml_ng::from_str::<Value>(y).unwrap();
        let spec = read_receiver(
            "pprof/go",
            &v("{ remote: { endpoint: 'http://127.0.0.1:6060/debug/pprof/profile?seconds=5' } }"),
        )
        .unwrap();
        assert!(matches!(spec, ReceiverSpec::Pprof(c) if c.remote.is_some()));
        let e = read_receiver("pprof", &v("{ remote: {} }"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("receivers.pprof.remote.endpoint: required"),
            "{e}"
        );
        let e = read_receiver("pprof", &v("{ self: {} }"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("receivers.pprof.self: not available"), "{e}");
        let e = read_receiver("pprof", &v("{}")).unwrap_err().to_string();
        assert!(e.contains("at least one of server, remote, file"), "{e}");
        let spec = read_receiver("pyroscope", &v("{ endpoint: '127.0.0.1:0' }")).unwrap();
        assert!(matches!(spec, ReceiverSpec::Pyroscope(c) if c.endpoint == "127.0.0.1:0"));
        let e = read_receiver("pyroscope", &v("{ endpont: x }"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("receivers.pyroscope"), "{e}");
    }

    #[test]
    fn upstream_errors_name_the_key() {
        let ok = read_upstream(
            "receivers.sentry",
            &serde_json::json!({"endpoint": "https://o0.ingest.sentry.io", "timeout": "10s"}),
        )
        .unwrap();
        assert_eq!(ok.timeout, Duration::from_secs(10));
        let e = read_upstream("receivers.sentry", &serde_json::json!({"timeout": "10s"}))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "receivers.sentry.upstream.endpoint: required (the upstream Sentry or Relay base URL)"
        );
        let e = read_upstream(
            "receivers.sentry",
            &serde_json::json!({"endpoint": "https://x", "tls": {"ca_file": "./missing-ca.pem"}}),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("receivers.sentry.upstream.tls.ca_file: cannot read ./missing-ca.pem"),
            "{e}"
        );
        let e = read_upstream(
            "receivers.sentry",
            &serde_json::json!({"endpoint": "https://x", "tls": {"sni": "x"}}),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("receivers.sentry.upstream: unknown field `sni`"),
            "{e}"
        );
    }
}
