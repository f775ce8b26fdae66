//! [`ConfigError`]: what is wrong with a configuration, at which key, and the underlying error
//! (a YAML parser's, a file read's) when there is one.

use std::error::Error;
use std::fmt;

/// A configuration error: the key (or source) it is about, what is wrong, and the underlying
/// error when another system failed (YAML parsing, reading a `${file:...}`).
///
/// Its text is one line, `<key>: <message>[: <underlying error>]`, e.g.
/// `exporters.sentry.dsn: environment variable SENTRY_DSN is not set` or
/// `profilink.yaml: invalid YAML: did not find expected key at line 3 column 5`; the underlying
/// error is also [`source`](Error::source).
#[derive(Debug)]
pub struct ConfigError {
    key: String,
    message: String,
    source: Option<Box<dyn Error + Send + Sync + 'static>>,
}

impl ConfigError {
    /// An error about `key` (a dotted key path such as `exporters.sentry.dsn`, a `--config`
    /// source, or empty for the configuration as a whole).
    pub fn at(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            key: key.into(),
            message: message.into(),
            source: None,
        }
    }

    /// The same error caused by `source` (whose text ends the message).
    pub fn with_source(mut self, source: impl Into<Box<dyn Error + Send + Sync>>) -> ConfigError {
        self.source = Some(source.into());
        self
    }

    /// An error from a one-line `<key>: <message>` text (the form component checks such as
    /// `validate()` return): split at the first `": "`; without one the text is the message.
    pub fn line(text: impl Into<String>) -> ConfigError {
        let text = text.into();
        match text.split_once(": ") {
            Some((key, message)) if !key.contains(' ') => ConfigError::at(key, message),
            _ => ConfigError::at("", text),
        }
    }

    /// The key path (or source) the error is about; empty when it is about no one key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// What is wrong, without the key and the underlying error.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error with `prefix` put before its key (`exporters.sentry` + `sending_queue.sizer`).
    pub fn under(mut self, prefix: &str) -> ConfigError {
        self.key = match (prefix.is_empty(), self.key.is_empty()) {
            (true, _) => self.key,
            (false, true) => prefix.to_owned(),
            (false, false) => format!("{prefix}.{}", self.key),
        };
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl Error for ConfigError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

impl ConfigError {
    /// The error of the `tls` section under `at` (`exporters.otlp`), keyed `<at>.tls.<key>`,
    /// with a file's I/O error kept as the source.
    pub fn tls(at: &str, e: profilink_tls::TlsError) -> ConfigError {
        let key = format!("{at}.tls.{}", e.key());
        match e {
            profilink_tls::TlsError::Read { path, source, .. } => {
                ConfigError::at(key, format!("cannot read {}", path.display())).with_source(source)
            }
            profilink_tls::TlsError::Invalid { message, .. } => ConfigError::at(key, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_key_message_and_source_on_one_line() {
        let e = ConfigError::at("exporters.sentry.dsn", "required");
        assert_eq!(e.to_string(), "exporters.sentry.dsn: required");
        assert!(e.source().is_none());
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "not found");
        let e = ConfigError::at("k", "cannot read /x").with_source(io);
        assert_eq!(e.to_string(), "k: cannot read /x: not found");
        assert_eq!(e.source().unwrap().to_string(), "not found");
        assert_eq!(e.key(), "k");
        assert_eq!(e.message(), "cannot read /x");
        let e = ConfigError::line("extensions.pprof.endpoint: required");
        assert_eq!(
            (e.key(), e.message()),
            ("extensions.pprof.endpoint", "required")
        );
        let e = ConfigError::line("no key here: a message");
        assert_eq!(
            (e.key(), e.to_string().as_str()),
            ("", "no key here: a message")
        );
        let e = ConfigError::at("", "no configuration given");
        assert_eq!(e.to_string(), "no configuration given");
        let e = ConfigError::at("sizer", "x").under("exporters.sentry.sending_queue");
        assert_eq!(e.key(), "exporters.sentry.sending_queue.sizer");
    }
}
