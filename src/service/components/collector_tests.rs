//! The OpenTelemetry Collector's spellings on whole configurations: type aliases, the receiver's
//! `include_metadata`, `sending_queue` at the Collector's levels and `file_storage`.

use super::*;
use crate::config::{Config, ConfigError};
use profilink_exporter::OtlpProtocol;

fn plan(text: &str) -> Result<Plan, ConfigError> {
    Plan::new(Config::from_yaml(text, &|_| None)?)
}

const DSN: &str = "https://0123456789abcdef0123456789abcdef@o1.example/42";

fn with_exporter(exporter: &str, extensions: &str) -> String {
    format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: 127.0.0.1:0, include_metadata: true }}
      http: {{ endpoint: 127.0.0.1:0, include_metadata: false }}
exporters:
  {exporter}
{extensions}
service:
  extensions: [{started}]
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [{id}] }}
"#,
        id = exporter.split(':').next().unwrap(),
        started = if extensions.is_empty() {
            ""
        } else {
            "file_storage/q"
        },
    )
}

#[test]
fn collector_type_names_are_aliases() {
    for (ty, protocol, endpoint) in [
        ("otlp_grpc", OtlpProtocol::Grpc, "127.0.0.1:4317"),
        ("otlphttp", OtlpProtocol::Http, "127.0.0.1:4318"),
    ] {
        let p = plan(&with_exporter(&format!("{ty}/back: {{}}"), "")).unwrap();
        match &p.components.exporters[&format!("{ty}/back")] {
            ExporterSpec::Otlp(c) => {
                assert_eq!(
                    (c.protocol, c.endpoint.as_str()),
                    (protocol, endpoint),
                    "{ty}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn include_metadata_is_accepted_as_a_boolean() {
    let p = plan(&with_exporter(&format!("sentry: {{ dsn: \"{DSN}\" }}"), "")).unwrap();
    assert!(matches!(
        p.components.receivers["otlp"],
        ReceiverSpec::Otlp { .. }
    ));
    let bad = with_exporter(&format!("sentry: {{ dsn: \"{DSN}\" }}"), "")
        .replace("include_metadata: true", "include_metadata: sometimes");
    let e = plan(&bad).unwrap_err().to_string();
    assert!(
        e.starts_with("receivers.otlp.protocols.grpc.include_metadata: invalid type"),
        "{e}"
    );
}

#[test]
fn sending_queue_takes_the_collectors_keys() {
    let p = plan(&with_exporter(
        &format!(
            "sentry: {{ dsn: \"{DSN}\", sending_queue: {{ enabled: true, num_consumers: 7, sizer: bytes, queue_size: 1048576, block_on_overflow: false, storage: /tmp/profilink-q }} }}"
        ),
        "",
    ))
    .unwrap();
    let ExporterSpec::Sentry(c) = &p.components.exporters["sentry"] else {
        panic!()
    };
    assert_eq!(c.consumers(), 7);
    assert_eq!(c.sending_queue.capacity_bytes(), 1 << 20);
    let refused = [
        (
            format!(
                "sentry: {{ dsn: \"{DSN}\", num_consumers: 2, sending_queue: {{ num_consumers: 3 }} }}"
            ),
            "exporters.sentry.sending_queue.num_consumers: 3 disagrees with num_consumers: 2",
        ),
        (
            format!(
                "sentry: {{ dsn: \"{DSN}\", sending_queue: {{ sizer: requests, queue_size: 100 }} }}"
            ),
            "exporters.sentry.sending_queue.sizer: requests is not available",
        ),
        (
            "file: { path: /tmp/profilink-f, sending_queue: { queue_size: 5000 } }".to_string(),
            "exporters.file.sending_queue.queue_size: counts requests without a sizer",
        ),
        (
            "file: { path: /tmp/profilink-f, sending_queue: { block_on_overflow: true } }"
                .to_string(),
            "exporters.file.sending_queue.block_on_overflow: true is not available",
        ),
    ];
    for (exporter, want) in refused {
        let e = plan(&with_exporter(&exporter, "")).unwrap_err().to_string();
        assert!(e.starts_with(want), "{e:?} should start with {want:?}");
    }
}

#[test]
fn storage_names_a_file_storage_extension_or_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ext = format!(
        "extensions:\n  file_storage/q: {{ directory: {}, timeout: 2s, compaction: {{ on_start: true }} }}",
        dir.path().display()
    );
    let p = plan(&with_exporter(
        &format!("sentry/eu: {{ dsn: \"{DSN}\", sending_queue: {{ storage: file_storage/q }} }}"),
        &ext,
    ))
    .unwrap();
    assert_eq!(
        p.components.exporters["sentry/eu"].queue_dir(),
        Some(dir.path().join("exporter_sentry_eu_profiles"))
    );
    assert!(matches!(
        p.components.extensions["file_storage/q"],
        ExtensionSpec::FileStorage(_)
    ));
    // Not the id of a configured extension: an error naming the key.
    let e = plan(&with_exporter(
        &format!("sentry: {{ dsn: \"{DSN}\", sending_queue: {{ storage: file_storage/other }} }}"),
        &ext,
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with(
            "exporters.sentry.sending_queue.storage: extension \"file_storage/other\" is not defined"
        ),
        "{e}"
    );
    // Keys of the Collector's file_storage that profilink has no use for are refused by name.
    let e = plan(&with_exporter(
        &format!("sentry: {{ dsn: \"{DSN}\" }}"),
        &ext.replace("timeout: 2s", "timeout: 2s, recreate: true"),
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("extensions.file_storage/q.recreate: unknown field `recreate`"),
        "{e}"
    );
}
