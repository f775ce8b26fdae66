//! `profilink components`: the component types of this build and their stability per signal,
//! in the shape of `otelcol components`.

use super::EXIT_OK;

/// One component type: its kind, name, and stability per signal.
struct Component {
    kind: &'static str,
    name: &'static str,
    stability: &'static [(&'static str, &'static str)],
}

/// Stability words are the Collector's (`Development`, `Alpha`, `Beta`, `Stable`).
const COMPONENTS: &[Component] = &[
    Component {
        kind: "receivers",
        name: "otlp",
        stability: &[("profiles", "Alpha"), ("traces", "Alpha")],
    },
    Component {
        kind: "receivers",
        name: "sentry",
        stability: &[("profiles", "Alpha"), ("traces", "Alpha")],
    },
    Component {
        kind: "receivers",
        name: "kafka",
        stability: &[("profiles", "Development"), ("traces", "Development")],
    },
    Component {
        kind: "receivers",
        name: "pprof",
        stability: &[("profiles", "Development")],
    },
    Component {
        kind: "receivers",
        name: "pyroscope",
        stability: &[("profiles", "Development")],
    },
    Component {
        kind: "processors",
        name: "batch",
        stability: &[("profiles", "Development"), ("traces", "Development")],
    },
    Component {
        kind: "processors",
        name: "profile_sampling",
        stability: &[("profiles", "Alpha")],
    },
    Component {
        kind: "processors",
        name: "profile_linking",
        stability: &[("profiles", "Alpha"), ("traces", "Alpha")],
    },
    Component {
        kind: "processors",
        name: "symbolize",
        stability: &[("profiles", "Development")],
    },
    Component {
        kind: "exporters",
        name: "sentry",
        stability: &[("profiles", "Alpha"), ("traces", "Alpha")],
    },
    Component {
        kind: "exporters",
        name: "otlp",
        stability: &[("profiles", "Alpha"), ("traces", "Alpha")],
    },
    // The Collector's current name of its OTLP/gRPC exporter: the same as `otlp`.
    Component {
        kind: "exporters",
        name: "otlp_grpc",
        stability: &[("profiles", "Alpha"), ("traces", "Alpha")],
    },
    Component {
        kind: "exporters",
        name: "otlp_http",
        stability: &[("profiles", "Alpha"), ("traces", "Alpha")],
    },
    // The Collector's former name of `otlp_http`.
    Component {
        kind: "exporters",
        name: "otlphttp",
        stability: &[("profiles", "Alpha"), ("traces", "Alpha")],
    },
    Component {
        kind: "exporters",
        name: "file",
        stability: &[("profiles", "Alpha")],
    },
    Component {
        kind: "exporters",
        name: "kafka",
        stability: &[("profiles", "Development"), ("traces", "Development")],
    },
    Component {
        kind: "extensions",
        name: "health_check",
        stability: &[("extension", "Beta")],
    },
    Component {
        kind: "extensions",
        name: "profile_store",
        stability: &[("extension", "Alpha")],
    },
    Component {
        kind: "extensions",
        name: "flamegraph_api",
        stability: &[("extension", "Alpha")],
    },
    Component {
        kind: "extensions",
        name: "file_storage",
        stability: &[("extension", "Alpha")],
    },
    Component {
        kind: "extensions",
        name: "bearertokenauth",
        stability: &[("extension", "Beta")],
    },
    Component {
        kind: "extensions",
        name: "pprof",
        stability: &[("extension", "Beta")],
    },
];

/// The listing as YAML.
pub fn listing() -> String {
    let mut out = format!(
        "buildinfo:\n    command: profilink\n    description: {}\n    version: {}\n",
        env!("CARGO_PKG_DESCRIPTION"),
        env!("CARGO_PKG_VERSION")
    );
    for kind in ["receivers", "processors", "exporters", "extensions"] {
        out.push_str(&format!("{kind}:\n"));
        for c in COMPONENTS.iter().filter(|c| c.kind == kind) {
            out.push_str(&format!("    - name: {}\n      stability:\n", c.name));
            for (signal, level) in c.stability {
                out.push_str(&format!("          {signal}: {level}\n"));
            }
        }
    }
    out
}

/// Prints the listing; exit 0.
pub fn run() -> u8 {
    print!("{}", listing());
    EXIT_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{EXPORTER_TYPES, EXTENSION_TYPES, PROCESSOR_TYPES, RECEIVER_TYPES};

    #[test]
    fn lists_exactly_the_types_the_configuration_accepts() {
        let listed = |kind: &str| -> Vec<&str> {
            COMPONENTS
                .iter()
                .filter(|c| c.kind == kind)
                .map(|c| c.name)
                .collect()
        };
        assert_eq!(listed("receivers"), RECEIVER_TYPES);
        assert_eq!(listed("processors"), PROCESSOR_TYPES);
        assert_eq!(listed("exporters"), EXPORTER_TYPES);
        assert_eq!(listed("extensions"), EXTENSION_TYPES);
        let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&listing()).unwrap();
        assert_eq!(yaml["exporters"][0]["name"].as_str(), Some("sentry"));
        assert_eq!(yaml["buildinfo"]["command"].as_str(), Some("profilink"));
    }
}
