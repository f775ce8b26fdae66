//! `${...}` references in configuration values, as the OpenTelemetry Collector's confmap
//! resolves them.
//!
//! | reference | value |
//! |---|---|
//! | `${env:NAME}` (or `${NAME}`) | the environment variable; unset is an error naming the key |
//! | `${env:NAME:-default}` | the variable, or `default` when it is unset or empty |
//! | `${file:PATH}` | the file's content (one trailing newline removed), at most [`MAX_FILE_BYTES`] |
//! | `$$` | a literal `$` |
//!
//! Expansion runs on the parsed YAML tree (string scalars only), so a value embedded in a
//! longer string can never change the document's structure. A string that is *wholly* one
//! reference is typed as the Collector types it: its value is parsed as YAML, so
//! `max_recv_msg_size_mib: ${env:N}` is a number, `insecure: ${env:FLAG}` a boolean and
//! `exporters: ${file:exporters.yaml}` a whole section. A scalar typed this way keeps its text
//! too ([`EXPANDED_TAG`]): where the field wants a string (a token that happens to be
//! `123456`), the text is used (see [`super::flex`]). Values read from the environment are not
//! expanded again; a mapping or sequence read from a file is (nested references, at most
//! [`MAX_DEPTH`] files deep).

use super::ConfigError;
use serde_yaml_ng::Value;
use serde_yaml_ng::value::{Tag, TaggedValue};
use std::io::Read;

/// The tag marking a wholly-referenced scalar that YAML typed as a number, boolean or null;
/// the tagged value is the original text.
pub const EXPANDED_TAG: &str = "profilink-expanded";
/// Largest file a `${file:...}` reference reads.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// How many `${file:...}` documents deep nested references are expanded.
pub const MAX_DEPTH: usize = 8;

/// Where references get their values.
pub struct Resolver<'a> {
    /// Reads an environment variable.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Reads a file (`${file:...}`); [`read_file`] in the binary.
    pub file: &'a dyn Fn(&str) -> Result<String, FileError>,
}

/// Why a file could not be read ([`read_file`]).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Opening or reading it failed.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// It is a directory, a device, ...
    #[error("{path} is not a regular file")]
    NotRegular {
        /// The file.
        path: String,
    },
    /// It is larger than [`MAX_FILE_BYTES`].
    #[error("{path} is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge {
        /// The file.
        path: String,
    },
}

impl FileError {
    /// A [`ConfigError`] at `key` saying this (the I/O error kept as its source).
    pub fn at(self, key: &str) -> ConfigError {
        let message = self.to_string();
        match self {
            FileError::Io { source, .. } => ConfigError::at(key, message).with_source(source),
            _ => ConfigError::at(key, message),
        }
    }
}

/// Reads a regular file of at most [`MAX_FILE_BYTES`] as UTF-8.
pub fn read_file(path: &str) -> Result<String, FileError> {
    let io = |source| FileError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_owned(),
        });
    }
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
        });
    }
    Ok(text)
}

/// Expands references in every string of `value`; `path` names the key in errors.
pub fn expand(value: &mut Value, path: &str, resolver: &Resolver<'_>) -> Result<(), ConfigError> {
    expand_at(value, path, resolver, 0)
}

fn expand_at(
    value: &mut Value,
    path: &str,
    resolver: &Resolver<'_>,
    depth: usize,
) -> Result<(), ConfigError> {
    match value {
        Value::String(s) if s.contains('$') => {
            if let Some(reference) = whole_reference(s) {
                let (text, source) = resolve(reference, path, resolver)?;
                *value = typed_value(text);
                if source == Source::File && matches!(value, Value::Mapping(_) | Value::Sequence(_))
                {
                    if depth >= MAX_DEPTH {
                        return Err(ConfigError::at(
                            path,
                            format!("${{file:...}} references nested more than {MAX_DEPTH} deep"),
                        ));
                    }
                    expand_at(value, path, resolver, depth + 1)?;
                }
            } else {
                *s = expand_str(s, path, resolver)?;
            }
            Ok(())
        }
        Value::Sequence(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                expand_at(item, &format!("{path}[{i}]"), resolver, depth)?;
            }
            Ok(())
        }
        Value::Mapping(map) => {
            for (k, v) in map.iter_mut() {
                let key = k.as_str().map_or_else(|| format!("{k:?}"), str::to_owned);
                let child = if path.is_empty() {
                    key
                } else {
                    format!("{path}.{key}")
                };
                expand_at(v, &child, resolver, depth)?;
            }
            Ok(())
        }
        Value::Tagged(t) => expand_at(&mut t.value, path, resolver, depth),
        _ => Ok(()),
    }
}

/// The reference when `s` is exactly one `${...}` and nothing else.
fn whole_reference(s: &str) -> Option<&str> {
    let body = s.strip_prefix("${")?.strip_suffix('}')?;
    (!body.contains('}') && !body.contains("${")).then_some(body)
}

/// A whole reference's text typed as YAML: mappings, sequences and strings as parsed;
/// numbers, booleans and null tagged with their text (see the module docs); text that is not
/// YAML stays a string.
fn typed_value(text: String) -> Value {
    match serde_yaml_ng::from_str::<Value>(&text) {
        Ok(v @ (Value::Mapping(_) | Value::Sequence(_) | Value::String(_))) => v,
        Ok(Value::Bool(_) | Value::Number(_) | Value::Null) => {
            Value::Tagged(Box::new(TaggedValue {
                tag: Tag::new(EXPANDED_TAG),
                value: Value::String(text),
            }))
        }
        Ok(Value::Tagged(_)) | Err(_) => Value::String(text),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Source {
    Env,
    File,
}

fn resolve(
    reference: &str,
    path: &str,
    resolver: &Resolver<'_>,
) -> Result<(String, Source), ConfigError> {
    if let Some(file) = reference.strip_prefix("file:") {
        if file.is_empty() {
            return Err(ConfigError::at(path, "${file:} needs a path"));
        }
        let mut text = (resolver.file)(file).map_err(|e| e.at(path))?;
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        return Ok((text, Source::File));
    }
    let spec = match reference.strip_prefix("env:") {
        Some(spec) => spec,
        None => match reference.split_once(':') {
            // `${NAME:-default}` is the env shorthand; any other `scheme:` is not resolved here.
            Some((scheme, rest)) if !rest.starts_with('-') => {
                return Err(ConfigError::at(
                    path,
                    format!(
                        "unsupported reference ${{{reference}}} (profilink resolves \
                         ${{env:NAME}}, ${{env:NAME:-default}} and ${{file:PATH}}; not {scheme}:)"
                    ),
                ));
            }
            _ => reference,
        },
    };
    let (name, default) = match spec.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (spec, None),
    };
    if name.is_empty()
        || name.as_bytes()[0].is_ascii_digit()
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(ConfigError::at(
            path,
            format!("invalid variable reference ${{{reference}}}"),
        ));
    }
    let value = match ((resolver.env)(name), default) {
        (Some(v), Some(d)) if v.is_empty() => d.to_owned(),
        (Some(v), _) => v,
        (None, Some(d)) => d.to_owned(),
        (None, None) => {
            return Err(ConfigError::at(
                path,
                format!("environment variable {name} is not set"),
            ));
        }
    };
    Ok((value, Source::Env))
}

fn expand_str(s: &str, path: &str, resolver: &Resolver<'_>) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| ConfigError::at(path, format!("unterminated ${{ in {s:?}")))?;
            let (value, _) = resolve(&body[..end], path, resolver)?;
            out.push_str(&value);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "DSN" => Some("https://k@h/1".into()),
            "EMPTY" => Some(String::new()),
            "N" => Some("12".into()),
            "FLAG" => Some("true".into()),
            "TOKEN" => Some("123456".into()),
            "MAP" => Some("{a: 1}".into()),
            "DOLLAR" => Some("$${env:DSN}".into()),
            _ => None,
        }
    }

    fn file(path: &str) -> Result<String, FileError> {
        match path {
            "/secrets/token" => Ok("s3cret\n".into()),
            "/conf/exporters.yaml" => Ok("sentry: {dsn: '${env:DSN}'}\n".into()),
            "/conf/loop.yaml" => Ok("x: ${file:/conf/loop.yaml}\n".into()),
            _ => Err(FileError::Io {
                path: path.into(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not found"),
            }),
        }
    }

    fn run(yaml: &str) -> Result<Value, String> {
        let mut v: Value = serde_yaml_ng::from_str(yaml).unwrap();
        expand(
            &mut v,
            "",
            &Resolver {
                env: &env,
                file: &file,
            },
        )
        .map_err(|e| e.to_string())?;
        Ok(v)
    }

    fn tagged(text: &str) -> Value {
        Value::Tagged(Box::new(TaggedValue {
            tag: Tag::new(EXPANDED_TAG),
            value: Value::String(text.into()),
        }))
    }

    #[test]
    fn expands_and_names_missing_variables() {
        let v = run("a: {dsn: '${env:DSN}', b: ['x${EMPTY}y', '$$5', 'a$b']}").unwrap();
        assert_eq!(v["a"]["dsn"].as_str(), Some("https://k@h/1"));
        assert_eq!(v["a"]["b"][0].as_str(), Some("xy"));
        assert_eq!(v["a"]["b"][1].as_str(), Some("$5"));
        assert_eq!(v["a"]["b"][2].as_str(), Some("a$b"));
        assert_eq!(
            run("exporters: {sentry: {dsn: '${env:NOPE}'}}"),
            Err("exporters.sentry.dsn: environment variable NOPE is not set".into())
        );
        assert!(
            run("k: '${env:X'")
                .unwrap_err()
                .starts_with("k: unterminated")
        );
        assert!(
            run("k: '${http://x}'")
                .unwrap_err()
                .contains("unsupported reference ${http://x}"),
        );
    }

    #[test]
    fn defaults_apply_when_unset_or_empty() {
        let v = run("a: '${env:NOPE:-4317}'\nb: 'h:${env:EMPTY:-x}'\nc: '${env:DSN:-d}'\nd: '${env:NOPE:-}'").unwrap();
        assert_eq!(v["a"], tagged("4317"));
        assert_eq!(v["b"].as_str(), Some("h:x"));
        assert_eq!(v["c"].as_str(), Some("https://k@h/1"));
        assert_eq!(v["d"], tagged(""));
    }

    #[test]
    fn whole_references_are_typed_and_keep_their_text() {
        let v = run("n: ${env:N}\nf: ${env:FLAG}\nt: ${env:TOKEN}\nm: ${env:MAP}\ns: 'x ${env:N}'")
            .unwrap();
        assert_eq!(v["n"], tagged("12"));
        assert_eq!(v["f"], tagged("true"));
        assert_eq!(v["t"], tagged("123456"));
        assert_eq!(v["m"]["a"].as_u64(), Some(1));
        assert_eq!(v["s"].as_str(), Some("x 12"));
    }

    #[test]
    fn environment_values_are_not_expanded_again() {
        let v = run("a: ${env:DOLLAR}").unwrap();
        assert_eq!(v["a"].as_str(), Some("$${env:DSN}"));
    }

    #[test]
    fn files_are_read_trimmed_and_sections_expanded() {
        let v =
            run("token: ${file:/secrets/token}\nexporters: ${file:/conf/exporters.yaml}").unwrap();
        assert_eq!(v["token"].as_str(), Some("s3cret"));
        assert_eq!(
            v["exporters"]["sentry"]["dsn"].as_str(),
            Some("https://k@h/1")
        );
        assert_eq!(
            run("k: ${file:/nope}"),
            Err("k: cannot read /nope: not found".into())
        );
        assert!(
            run("k: ${file:/conf/loop.yaml}")
                .unwrap_err()
                .contains("nested more than 8")
        );
    }

    #[test]
    fn read_file_refuses_what_is_not_a_small_regular_file() {
        assert!(
            read_file("/")
                .unwrap_err()
                .to_string()
                .contains("not a regular file")
        );
        let missing = read_file("/nonexistent/profilink").unwrap_err();
        assert!(
            std::error::Error::source(&missing).is_some(),
            "the I/O error is kept"
        );
        let e = missing.at("exporters.sentry.dsn");
        assert!(
            e.to_string()
                .starts_with("exporters.sentry.dsn: cannot read /nonexistent/profilink: "),
            "{e}"
        );
        let dir = tempfile_dir();
        let path = dir.join("t");
        std::fs::write(&path, "v\n").unwrap();
        assert_eq!(read_file(path.to_str().unwrap()).unwrap(), "v\n");
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("profilink-expand-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
