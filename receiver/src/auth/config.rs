//! The configuration of authentication: `auth:` on a listener or exporter ([`AuthSettings`]),
//! and the `bearertokenauth` extension ([`BearerTokenAuthConfig`]), with the Collector's keys
//! and defaults.

use serde::Deserialize;
use std::fmt;
use std::path::PathBuf;

/// `auth:` of a receiver protocol or an exporter, as the Collector's `configauth`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// The component id of the authenticator extension (`bearertokenauth`,
    /// `bearertokenauth/name`); it must be configured under `extensions` and listed in
    /// `service.extensions`.
    pub authenticator: String,
}

/// `extensions.bearertokenauth[/name]`: the Collector contrib's bearer token authenticator.
///
/// One of `token`, `tokens` or `filename` is required; `token` and `tokens` exclude each
/// other; with `filename` the configured `token`/`tokens` are ignored (as the Collector does,
/// with a warning at start). The expected (server) or sent (client) header value is
/// `<scheme> <token>`, or the token alone when `scheme` is empty.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BearerTokenAuthConfig {
    /// The auth scheme. Default `Bearer`; empty: the header carries the token alone.
    pub scheme: String,
    /// One static token.
    pub token: Option<String>,
    /// Several static tokens: a server accepts any of them; a client sends the first.
    pub tokens: Vec<String>,
    /// A file with one token per line (blank lines skipped), re-read when it changes.
    pub filename: Option<PathBuf>,
    /// The header (gRPC metadata key, lowercased) carrying the value. Default `Authorization`.
    pub header: String,
}

impl Default for BearerTokenAuthConfig {
    fn default() -> Self {
        BearerTokenAuthConfig {
            scheme: "Bearer".into(),
            token: None,
            tokens: Vec::new(),
            filename: None,
            header: "Authorization".into(),
        }
    }
}

/// Tokens are secrets: shown as their count only.
impl fmt::Debug for BearerTokenAuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerTokenAuthConfig")
            .field("scheme", &self.scheme)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tokens", &format_args!("<{} redacted>", self.tokens.len()))
            .field("filename", &self.filename)
            .field("header", &self.header)
            .finish()
    }
}

impl BearerTokenAuthConfig {
    /// Checks the settings; the error starts with the key it is about (`token: …`).
    pub fn validate(&self) -> Result<(), String> {
        let token = self.token.as_deref().filter(|t| !t.is_empty());
        if token.is_none() && self.tokens.is_empty() && self.filename.is_none() {
            return Err("token: one of token, tokens or filename is required".into());
        }
        if token.is_some() && !self.tokens.is_empty() {
            return Err("tokens: token and tokens cannot both be set".into());
        }
        if let Some(i) = self.tokens.iter().position(|t| t.trim().is_empty()) {
            return Err(format!("tokens[{i}]: is empty"));
        }
        if self
            .filename
            .as_ref()
            .is_some_and(|f| f.as_os_str().is_empty())
        {
            return Err("filename: is empty".into());
        }
        if http::HeaderName::from_bytes(self.header.as_bytes()).is_err() {
            return Err(format!(
                "header: {:?} is not a valid header name",
                self.header
            ));
        }
        if self.scheme.contains(char::is_whitespace) {
            return Err(format!("scheme: {:?} contains whitespace", self.scheme));
        }
        for t in self.token.iter().chain(&self.tokens) {
            if http::HeaderValue::from_str(&format!("{} {t}", self.scheme)).is_err() {
                // Never echo the token.
                return Err("token: contains characters a header value cannot carry".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> BearerTokenAuthConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn defaults_and_validation() {
        let c = parse(r#"{"token":"s3cret"}"#);
        assert_eq!(
            (c.scheme.as_str(), c.header.as_str()),
            ("Bearer", "Authorization")
        );
        assert_eq!(c.validate(), Ok(()));
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        for (json, want) in [
            ("{}", "token: one of token, tokens or filename is required"),
            (
                r#"{"token":""}"#,
                "token: one of token, tokens or filename is required",
            ),
            (
                r#"{"token":"a","tokens":["b"]}"#,
                "tokens: token and tokens cannot both be set",
            ),
            (r#"{"tokens":["a"," "]}"#, "tokens[1]: is empty"),
            (r#"{"filename":""}"#, "filename: is empty"),
            (
                r#"{"token":"a","header":"bad header"}"#,
                "header: \"bad header\" is not a valid header name",
            ),
            (
                r#"{"token":"a","scheme":"Be arer"}"#,
                "scheme: \"Be arer\" contains whitespace",
            ),
            (
                r#"{"token":"a\nb"}"#,
                "token: contains characters a header value cannot carry",
            ),
        ] {
            assert_eq!(parse(json).validate(), Err(want.to_string()), "{json}");
        }
        assert_eq!(parse(r#"{"filename":"t","token":"x"}"#).validate(), Ok(()));
        assert_eq!(
            parse(r#"{"tokens":["a","b"],"scheme":""}"#).validate(),
            Ok(())
        );
        assert!(serde_json::from_str::<BearerTokenAuthConfig>(r#"{"tokn":"x"}"#).is_err());
        assert!(serde_json::from_str::<AuthSettings>(r#"{"authenticator":"a","x":1}"#).is_err());
    }
}
