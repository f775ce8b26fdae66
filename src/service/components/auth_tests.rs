//! `auth`, `cors`, `bearertokenauth` and `pprof` in whole configurations: what is read, and the
//! errors naming the key.

use super::*;
use crate::config::{Config, ConfigError};

fn plan(text: &str) -> Result<Plan, ConfigError> {
    let config = Config::from_yaml(text, &|_| None)?;
    Plan::new(config)
}

const BASE: &str = r#"
extensions:
  bearertokenauth/in: { tokens: [a, b] }
  bearertokenauth/out: { token: c, scheme: Token, header: X-Auth }
  pprof: { endpoint: 127.0.0.1:0 }
receivers:
  otlp:
    protocols:
      grpc: { endpoint: 127.0.0.1:0, auth: { authenticator: bearertokenauth/in } }
      http:
        endpoint: 127.0.0.1:0
        auth: { authenticator: bearertokenauth/in }
        cors: { allowed_origins: ["https://*.example.com"], allowed_headers: [Authorization], max_age: 60 }
exporters:
  otlp: { endpoint: "https://backend.example:4317", auth: { authenticator: bearertokenauth/out } }
service:
  extensions: [bearertokenauth/in, bearertokenauth/out, pprof]
  pipelines:
    profiles: { receivers: [otlp], exporters: [otlp] }
"#;

#[test]
fn reads_auth_cors_and_the_extensions() {
    let p = plan(BASE).unwrap();
    let c = &p.components;
    let ReceiverSpec::Otlp { grpc, http } = &c.receivers["otlp"] else {
        panic!("otlp receiver");
    };
    let grpc = grpc.as_ref().unwrap();
    assert_eq!(
        grpc.auth.as_ref().unwrap().authenticator,
        "bearertokenauth/in"
    );
    assert!(grpc.authenticator.is_none(), "resolved at start only");
    let cors = http.as_ref().unwrap().cors.as_ref().unwrap();
    assert!(cors.origin_allowed("https://app.example.com"));
    assert_eq!(cors.max_age, 60);
    assert_eq!(
        c.exporter_auth["otlp"].authenticator, "bearertokenauth/out",
        "auth is taken out of the exporter's own config"
    );
    assert!(matches!(c.exporters["otlp"], ExporterSpec::Otlp(_)));
    match &c.extensions["bearertokenauth/out"] {
        ExtensionSpec::BearerTokenAuth(a) => {
            assert_eq!((a.scheme.as_str(), a.header.as_str()), ("Token", "X-Auth"))
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(c.extensions["pprof"], ExtensionSpec::Pprof(_)));
}

#[test]
fn errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.token");
    let cases = [
        (
            BASE.replace(
                "grpc: { endpoint: 127.0.0.1:0, auth: { authenticator: bearertokenauth/in } }",
                "grpc: { endpoint: 127.0.0.1:0, auth: { authenticator: bearertokenauth/nope } }",
            ),
            "receivers.otlp.protocols.grpc.auth.authenticator: \"bearertokenauth/nope\" is not configured under extensions",
        ),
        (
            BASE.replace(
                "otlp: { endpoint: \"https://backend.example:4317\", auth: { authenticator: bearertokenauth/out } }",
                "otlp: { endpoint: \"https://backend.example:4317\", auth: { authenticator: pprof } }",
            ),
            "exporters.otlp.auth.authenticator: extensions.pprof is not an authenticator",
        ),
        (
            BASE.replace(
                "extensions: [bearertokenauth/in, bearertokenauth/out, pprof]",
                "extensions: [bearertokenauth/out]",
            ),
            "receivers.otlp.protocols.grpc.auth.authenticator: bearertokenauth/in is not listed in service.extensions",
        ),
        (
            BASE.replace(
                "auth: { authenticator: bearertokenauth/out }",
                "auth: { authenticatr: bearertokenauth/out }",
            ),
            "exporters.otlp.auth.authenticatr: unknown field",
        ),
        (
            BASE.replace(
                "grpc: { endpoint: 127.0.0.1:0, auth:",
                "grpc: { endpoint: 127.0.0.1:0, bearer_token: x, auth:",
            ),
            "receivers.otlp.protocols.grpc.bearer_token: set either bearer_token or auth, not both",
        ),
        (
            BASE.replace("{ tokens: [a, b] }", "{ scheme: Bearer }"),
            "extensions.bearertokenauth/in.token: one of token, tokens or filename is required",
        ),
        (
            BASE.replace(
                "{ tokens: [a, b] }",
                &format!("{{ filename: {} }}", missing.display()),
            ),
            "extensions.bearertokenauth/in.filename: cannot read ",
        ),
        (
            BASE.replace("allowed_headers: [Authorization]", "allowed_headers: [\"a b\"]"),
            "receivers.otlp.protocols.http.cors.allowed_headers[0]: \"a b\" is not a valid header name",
        ),
        (
            BASE.replace("max_age: 60", "max_age: soon"),
            "receivers.otlp.protocols.http.cors.max_age: ",
        ),
        (
            BASE.replace(
                "pprof: { endpoint: 127.0.0.1:0 }",
                "pprof: { endpoint: 127.0.0.1:0, mutex_profile_fraction: 5 }",
            ),
            "extensions.pprof.mutex_profile_fraction: Go's mutex profile has no equivalent",
        ),
        (
            BASE.replace(
                "pprof: { endpoint: 127.0.0.1:0 }",
                "pprof: {}\n  pprof/2: {}",
            )
            .replace(", pprof]", ", pprof, pprof/2]"),
            "service.extensions: only one pprof may run, found pprof, pprof/2",
        ),
        (
            BASE.replace(
                "exporters:\n",
                "  sentry: { auth: { authenticator: bearertokenauth/in } }\nexporters:\n",
            ),
            "receivers.sentry.auth: not available on the sentry receiver",
        ),
        (
            BASE.replace(
                "exporters:\n",
                "exporters:\n  file: { path: /tmp/x, auth: { authenticator: bearertokenauth/out } }\n",
            ),
            "exporters.file.auth: not available on the file exporter",
        ),
    ];
    for (text, expected) in cases {
        let e = plan(&text).unwrap_err().to_string();
        assert!(e.contains(expected), "{e:?} should contain {expected:?}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
}

/// The kafka receiver's and exporter's `auth` is the Collector's `configkafka` one (SASL, and
/// the deprecated `auth.tls`), not an authenticator: it reaches their configs, and its errors
/// name the key under the component.
#[test]
fn kafka_auth_is_the_kafka_configs_own() {
    let text = r#"
receivers:
  kafka:
    brokers: [kafka:9093]
    auth: { sasl: { mechanism: SCRAM-SHA-256, username: u, password: p4ss } }
exporters:
  kafka:
    brokers: [kafka:9093]
    auth: { sasl: { mechanism: PLAIN, username: u, password: p4ss } }
service:
  pipelines:
    profiles: { receivers: [kafka], exporters: [kafka] }
"#;
    let p = plan(text).unwrap();
    let c = &p.components;
    let ExporterSpec::Kafka(e) = &c.exporters["kafka"] else {
        panic!("kafka exporter");
    };
    assert_eq!(e.auth.sasl.as_ref().unwrap().mechanism, "PLAIN");
    let ReceiverSpec::Kafka(r) = &c.receivers["kafka"] else {
        panic!("kafka receiver");
    };
    assert_eq!(r.auth.sasl.as_ref().unwrap().mechanism, "SCRAM-SHA-256");
    assert!(c.exporter_auth.is_empty());
    // The typed components never show it (the raw `p.config` tree holds every secret as
    // written, as for the other components).
    assert!(!format!("{c:?}").contains("p4ss"), "the password is shown");
    for (from, to, expected) in [
        (
            "mechanism: PLAIN, username: u, password: p4ss",
            "mechanism: PLAIN, username: u",
            "exporters.kafka.auth.sasl.password: is required with mechanism PLAIN",
        ),
        (
            "mechanism: PLAIN",
            "mechanism: AWS_MSK_IAM_OAUTHBEARER",
            "exporters.kafka.auth.sasl.mechanism: AWS_MSK_IAM_OAUTHBEARER is not supported",
        ),
        (
            "auth: { sasl: { mechanism: PLAIN, username: u, password: p4ss } }",
            "tls: { ca_file: /nonexistent/ca.pem }",
            "exporters.kafka.tls.ca_file: cannot read /nonexistent/ca.pem",
        ),
        (
            "auth: { sasl: { mechanism: PLAIN, username: u, password: p4ss } }",
            "auth: { authenticator: bearertokenauth/out }",
            "exporters.kafka.auth.authenticator: unknown field `authenticator`",
        ),
    ] {
        let e = plan(&text.replace(from, to)).unwrap_err().to_string();
        assert!(e.contains(expected), "{e:?} should contain {expected:?}");
        assert!(!e.contains("p4ss"), "the password is shown: {e}");
    }
}

#[test]
fn a_token_file_is_read_when_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t");
    std::fs::write(&file, "\n\n").unwrap();
    let text = BASE.replace(
        "{ tokens: [a, b] }",
        &format!("{{ filename: {} }}", file.display()),
    );
    let e = plan(&text).unwrap_err().to_string();
    assert!(e.ends_with("holds no token"), "{e}");
    std::fs::write(&file, "secret\n").unwrap();
    assert!(plan(&text).is_ok());
}
