//! The component reading and the plan's checks, on whole configurations.

use super::*;
use crate::config::{Config, ConfigError};
use profilink_exporter::OtlpProtocol;
use std::time::Duration;

fn plan(text: &str) -> Result<Plan, ConfigError> {
    let config = Config::from_yaml(text, &|_| None)?;
    Plan::new(config)
}

const BASE: &str = r#"
receivers:
  otlp:
    protocols:
      grpc:
      http: { endpoint: 127.0.0.1:0 }
processors:
  batch: { timeout: 1s, send_batch_size: 100 }
  profile_sampling: { session_sample_rate: 0.5 }
exporters:
  sentry: { dsn: "https://0123456789abcdef0123456789abcdef@o1.example/42", timeout: 5s }
  otlp_http: {}
  file: { path: /tmp/profilink-test-data }
extensions:
  health_check: {}
service:
  extensions: [health_check]
  pipelines:
    profiles: { receivers: [otlp], processors: [batch, profile_sampling], exporters: [sentry, file, otlp_http] }
"#;

#[test]
fn reads_every_section() {
    let p = plan(BASE).unwrap();
    let c = &p.components;
    match &c.receivers["otlp"] {
        ReceiverSpec::Otlp { grpc, http } => {
            assert_eq!(grpc.as_ref().unwrap().endpoint, "127.0.0.1:4317");
            assert_eq!(http.as_ref().unwrap().endpoint, "127.0.0.1:0");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        c.processors["batch"],
        ProcessorSpec::Batch(BatchConfig {
            timeout: Duration::from_secs(1),
            send_batch_size: 100,
            send_batch_max_size: 0
        })
    );
    match &c.exporters["otlp_http"] {
        ExporterSpec::Otlp(o) => {
            assert_eq!(o.protocol, OtlpProtocol::Http);
            assert_eq!(o.endpoint, "127.0.0.1:4318");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        c.extensions["health_check"],
        ExtensionSpec::HealthCheck(_)
    ));
}

#[test]
fn traces_pipelines_are_checked() {
    let with = |extra: &str| {
        BASE.replace(
            "    profiles: { receivers: [otlp]",
            &format!("{extra}\n    profiles: {{ receivers: [otlp]"),
        )
    };
    let ok = with(
        "    traces: { receivers: [otlp], processors: [batch], exporters: [sentry, otlp_http] }",
    )
    .replace(
        "processors:\n",
        "processors:\n  profile_linking: { wait: 2s }\n",
    );
    let p = plan(&ok).unwrap();
    assert!(matches!(
        p.components.processors["profile_linking"],
        ProcessorSpec::Linking(ref c) if c.wait == Duration::from_secs(2)
    ));
    let cases = [
        (
            with("    traces: { receivers: [otlp], exporters: [file] }"),
            "service.pipelines.traces.exporters: file: a file exporter cannot export traces",
        ),
        (
            with(
                "    traces: { receivers: [otlp], processors: [profile_sampling], exporters: [sentry] }",
            ),
            "service.pipelines.traces.processors: profile_sampling applies to profiles pipelines only",
        ),
        (
            with("    logs: { receivers: [otlp], exporters: [sentry] }"),
            "service.pipelines.logs: unknown signal \"logs\"",
        ),
    ];
    for (text, expected) in cases {
        let e = plan(&text).unwrap_err().to_string();
        assert!(e.contains(expected), "{e:?} should contain {expected:?}");
    }
}

#[test]
fn store_and_flamegraph_extensions() {
    let with = |ext: &str, list: &str| {
        BASE.replace(
            "  health_check: {}\n",
            &format!("  health_check: {{}}\n{ext}"),
        )
        .replace(
            "extensions: [health_check]",
            &format!("extensions: [{list}]"),
        )
    };
    let text = with(
        "  profile_store: { path: /tmp/s.db, retention: 1h }\n  flamegraph_api: { endpoint: 127.0.0.1:0 }\n",
        "health_check, flamegraph_api, profile_store",
    );
    let p = plan(&text).unwrap();
    let (id, cfg) = p.profile_store().expect("store runs");
    assert_eq!(id, "profile_store");
    assert_eq!(cfg.retention, Duration::from_secs(3600));
    assert_eq!(cfg.max_size_mib, 1024, "default");

    let text = with(
        "  profile_store: {}\n  flamegraph_api: {}\n",
        "health_check, flamegraph_api",
    );
    let e = plan(&text).unwrap_err().to_string();
    assert!(e.contains("flamegraph_api needs a profile_store"), "{e}");
    let text = with(
        "  profile_store: {}\n  profile_store/2: {}\n",
        "profile_store, profile_store/2",
    );
    let e = plan(&text).unwrap_err().to_string();
    assert!(e.contains("only one profile_store"), "{e}");
    let text = with("  profile_store: { retention: soon }\n", "profile_store");
    let e = plan(&text).unwrap_err().to_string();
    assert!(e.starts_with("extensions.profile_store.retention"), "{e}");
    // Configured but not listed: not run.
    let text = with("  profile_store: {}\n", "health_check");
    assert!(plan(&text).unwrap().profile_store().is_none());
}

#[test]
fn errors_name_the_key() {
    let cases = [
            (
                BASE.replace("timeout: 5s", "timeout: 5x"),
                "exporters.sentry.timeout: ",
            ),
            (
                BASE.replace("send_batch_size: 100", "send_batch_sise: 100"),
                "unknown field `send_batch_sise`",
            ),
            (
                BASE.replace("http: { endpoint", "htp: { endpoint"),
                "receivers.otlp.protocols.htp: unknown protocol",
            ),
            (
                BASE.replace("session_sample_rate: 0.5", "session_sample_rate: 2"),
                "processors.profile_sampling.session_sample_rate: must be between 0 and 1",
            ),
            (
                BASE.replace(
                    "\"https://0123456789abcdef0123456789abcdef@o1.example/42\"",
                    "\"nonsense\"",
                ),
                "exporters.sentry.dsn: ",
            ),
            (
                BASE.replace("sentry: { dsn: \"https://0123456789abcdef0123456789abcdef@o1.example/42\", timeout: 5s }", "sentry: {}"),
                "exporters.sentry.dsn: required",
            ),
            (
                BASE.replace("health_check: {}", "health_check: { endpont: x }"),
                "extensions.health_check.endpont: unknown field `endpont`",
            ),
            (
                BASE.replace("file: { path: /tmp/profilink-test-data }", "file: { path: /tmp/q, sending_queue: { storage: ./profilink-data/queue } }")
                    .replace("sentry: { dsn: \"https://0123456789abcdef0123456789abcdef@o1.example/42\", timeout: 5s }",
                             "sentry: { dsn: \"https://0123456789abcdef0123456789abcdef@o1.example/42\" }"),
                "is already the queue of exporter",
            ),
        ];
    for (text, expected) in cases {
        let e = plan(&text).unwrap_err().to_string();
        assert!(e.contains(expected), "{e:?} should contain {expected:?}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
}
