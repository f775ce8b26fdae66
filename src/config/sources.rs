//! Where a configuration comes from, as the Collector's `--config` and `--set` flags say:
//! several sources merged in order, then `--set` overrides.
//!
//! | `--config` value | source |
//! |---|---|
//! | `PATH` or `file:PATH` | a YAML file |
//! | `env:NAME` | YAML held in an environment variable |
//! | `yaml:TEXT` | inline YAML, e.g. `yaml:exporters::sentry::timeout: 10s` |
//!
//! Mappings merge key by key (a later source wins on conflicts); sequences and scalars are
//! replaced whole. In every source a key containing `::` is a path (`a::b: 1` is `a: {b: 1}`).
//! `--set KEY=VALUE` sets one key after the merge; KEY is a `::` path (`.` also separates
//! when the key has no `::`), VALUE is YAML (`--set service::pipelines::profiles::exporters=[file]`).

use super::ConfigError;
use super::expand::{FileError, Resolver};
use serde_yaml_ng::{Mapping, Value};

/// The `--config` and `--set` values of one command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// `--config` values, in order (see the module docs).
    pub configs: Vec<String>,
    /// `--set KEY=VALUE` values, in order.
    pub sets: Vec<String>,
}

impl Sources {
    /// One file.
    pub fn file(path: &std::path::Path) -> Sources {
        Sources {
            configs: vec![format!("file:{}", path.display())],
            sets: Vec::new(),
        }
    }
}

/// Reads, parses and merges every source, then applies the `--set` overrides. The result is
/// not expanded yet.
pub fn merged_tree(sources: &Sources, resolver: &Resolver<'_>) -> Result<Value, ConfigError> {
    if sources.configs.is_empty() {
        return Err(ConfigError::at("", "no configuration given (--config)"));
    }
    let mut tree = Value::Mapping(Mapping::new());
    for source in &sources.configs {
        let text = read_source(source, resolver)?;
        let doc = parse_document(&text).map_err(|e| e.under(&describe(source)))?;
        merge(&mut tree, doc);
    }
    for set in &sources.sets {
        let at = format!("--set {set}");
        let (key, value) = set
            .split_once('=')
            .ok_or_else(|| ConfigError::at(&at, "expected KEY=VALUE"))?;
        let path = key_path(key.trim());
        if path.iter().any(|p| p.is_empty()) {
            return Err(ConfigError::at(&at, "empty key"));
        }
        let value: Value = serde_yaml_ng::from_str(value)
            .map_err(|e| ConfigError::at(&at, "invalid YAML value").with_source(e))?;
        let mut nested = value;
        for part in path.iter().rev() {
            let mut map = Mapping::new();
            map.insert(Value::String((*part).to_owned()), nested);
            nested = Value::Mapping(map);
        }
        merge(&mut tree, nested);
    }
    Ok(tree)
}

/// Parses one YAML document into a mapping (empty document: empty mapping), with `::` keys
/// split into nested mappings. Errors have no key (the caller names the source); a parse
/// error keeps the parser's error (with its line and column) as the source.
pub fn parse_document(text: &str) -> Result<Value, ConfigError> {
    let doc: Value = serde_yaml_ng::from_str(text)
        .map_err(|e| ConfigError::at("", "invalid YAML").with_source(e))?;
    match doc {
        Value::Null => Ok(Value::Mapping(Mapping::new())),
        Value::Mapping(_) => Ok(split_keys(doc)),
        _ => Err(ConfigError::at(
            "",
            "the configuration must be a mapping at the top",
        )),
    }
}

fn read_source(source: &str, resolver: &Resolver<'_>) -> Result<String, ConfigError> {
    if let Some(text) = source.strip_prefix("yaml:") {
        return Ok(text.to_owned());
    }
    if let Some(name) = source.strip_prefix("env:") {
        return (resolver.env)(name).ok_or_else(|| {
            ConfigError::at(
                format!("--config env:{name}"),
                format!("environment variable {name} is not set"),
            )
        });
    }
    let path = source.strip_prefix("file:").unwrap_or(source);
    if path != source || !has_scheme(source) {
        return (resolver.file)(path).map_err(|e: FileError| e.at(path));
    }
    Err(ConfigError::at(
        format!("--config {source}"),
        "unsupported source (profilink reads PATH, file:PATH, env:NAME, yaml:TEXT)",
    ))
}

/// `scheme:...` as a URI scheme (two or more letters), not a path.
fn has_scheme(source: &str) -> bool {
    source.split_once(':').is_some_and(|(scheme, _)| {
        scheme.len() >= 2
            && scheme.as_bytes()[0].is_ascii_alphabetic()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.')
            && !scheme.contains('.')
    })
}

fn describe(source: &str) -> String {
    match source.strip_prefix("file:") {
        Some(path) => path.to_owned(),
        None if source.starts_with("yaml:") || source.starts_with("env:") => {
            format!("--config {source}")
        }
        None => source.to_owned(),
    }
}

fn key_path(key: &str) -> Vec<&str> {
    if key.contains("::") {
        key.split("::").collect()
    } else {
        key.split('.').collect()
    }
}

fn split_keys(value: Value) -> Value {
    match value {
        Value::Mapping(map) => {
            let mut out = Value::Mapping(Mapping::new());
            for (k, v) in map {
                let v = split_keys(v);
                let nested = match k.as_str() {
                    Some(s) if s.contains("::") => {
                        let mut nested = v;
                        for part in s.split("::").collect::<Vec<_>>().into_iter().rev() {
                            let mut m = Mapping::new();
                            m.insert(Value::String(part.to_owned()), nested);
                            nested = Value::Mapping(m);
                        }
                        nested
                    }
                    _ => {
                        let mut m = Mapping::new();
                        m.insert(k, v);
                        Value::Mapping(m)
                    }
                };
                merge(&mut out, nested);
            }
            out
        }
        Value::Sequence(items) => Value::Sequence(items.into_iter().map(split_keys).collect()),
        other => other,
    }
}

/// Merges `over` into `base`: mappings key by key, anything else replaced.
pub fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(base), Value::Mapping(over)) => {
            for (k, v) in over {
                match base.get_mut(&k) {
                    Some(existing) if existing.is_mapping() && v.is_mapping() => merge(existing, v),
                    _ => {
                        base.insert(k, v);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "CONF").then(|| "exporters: {file: {path: /from/env}}".into())
    }

    fn file(path: &str) -> Result<String, FileError> {
        match path {
            "base.yaml" => Ok("receivers: {otlp: {protocols: {grpc: {}, http: {}}}}\n\
                               exporters: {file: {path: /a, sparse_threads: drop}}\n\
                               service: {pipelines: {profiles: {receivers: [otlp], exporters: [file]}}}"
                .into()),
            "over.yaml" => Ok("exporters::file::path: /b\nservice: {pipelines: {profiles: {exporters: [file, file]}}}".into()),
            _ => Err(FileError::NotRegular { path: path.into() }),
        }
    }

    fn tree(configs: &[&str], sets: &[&str]) -> Result<Value, String> {
        let sources = Sources {
            configs: configs.iter().map(|s| s.to_string()).collect(),
            sets: sets.iter().map(|s| s.to_string()).collect(),
        };
        merged_tree(
            &sources,
            &Resolver {
                env: &env,
                file: &file,
            },
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn sources_merge_in_order_and_sets_win() {
        let t = tree(&["base.yaml", "file:over.yaml"], &[]).unwrap();
        assert_eq!(t["exporters"]["file"]["path"].as_str(), Some("/b"));
        assert_eq!(
            t["exporters"]["file"]["sparse_threads"].as_str(),
            Some("drop")
        );
        // Sequences are replaced, not appended.
        assert_eq!(
            t["service"]["pipelines"]["profiles"]["exporters"]
                .as_sequence()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            t["service"]["pipelines"]["profiles"]["receivers"][0].as_str(),
            Some("otlp")
        );

        let t = tree(
            &[
                "base.yaml",
                "env:CONF",
                "yaml:receivers::otlp::protocols::http: null",
            ],
            &[
                "exporters::file::sparse_threads=group",
                "processors.batch.timeout=2s",
                "a::b=[1, 2]",
            ],
        )
        .unwrap();
        assert_eq!(t["exporters"]["file"]["path"].as_str(), Some("/from/env"));
        assert_eq!(
            t["exporters"]["file"]["sparse_threads"].as_str(),
            Some("group")
        );
        assert!(t["receivers"]["otlp"]["protocols"]["http"].is_null());
        assert!(t["receivers"]["otlp"]["protocols"]["grpc"].is_mapping());
        assert_eq!(t["processors"]["batch"]["timeout"].as_str(), Some("2s"));
        assert_eq!(t["a"]["b"][1].as_u64(), Some(2));
    }

    #[test]
    fn bad_sources_say_which() {
        assert_eq!(
            tree(&["nope.yaml"], &[]),
            Err("nope.yaml: nope.yaml is not a regular file".into())
        );
        assert!(
            tree(&["https://x/c.yaml"], &[])
                .unwrap_err()
                .contains("unsupported source")
        );
        assert!(
            tree(&["env:NOPE"], &[])
                .unwrap_err()
                .contains("NOPE is not set")
        );
        assert!(
            tree(&["yaml:[1]"], &[])
                .unwrap_err()
                .contains("mapping at the top")
        );
        assert!(
            tree(&["base.yaml"], &["novalue"])
                .unwrap_err()
                .contains("expected KEY=VALUE")
        );
        assert!(tree(&[], &[]).unwrap_err().contains("no configuration"));
        assert!(
            tree(&["yaml:a: [1"], &[])
                .unwrap_err()
                .starts_with("--config yaml:a: [1: invalid YAML: ")
        );
    }
}
