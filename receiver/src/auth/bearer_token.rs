//! [`BearerTokenAuth`]: the running `bearertokenauth` extension, for servers (checking a
//! request's header) and clients (the header to send).

use super::config::BearerTokenAuthConfig;
use super::token_file::{self, Poll, TokenFileError, Watched};
use http::{HeaderMap, HeaderName, HeaderValue};
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Why a request was not authenticated. The messages never carry a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// The header is absent or empty.
    #[error("missing or empty authorization header: {0}")]
    Missing(String),
    /// The header does not carry the scheme and one of the tokens.
    #[error("scheme or token does not match")]
    Mismatch,
    /// The listener's `auth` names an authenticator that was not resolved.
    #[error("the listener's authenticator is not available")]
    Unresolved,
}

/// The running `bearertokenauth` extension (see the [module docs](super)).
pub struct BearerTokenAuth {
    scheme: String,
    header: HeaderName,
    filename: Option<PathBuf>,
    /// The tokens (without the scheme); replaced when the file changes.
    tokens: RwLock<Arc<[String]>>,
    /// The file content the tokens were read from.
    file_content: Vec<u8>,
}

/// Shows the scheme, header and file; never the tokens.
impl fmt::Debug for BearerTokenAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerTokenAuth")
            .field("scheme", &self.scheme)
            .field("header", &self.header)
            .field("filename", &self.filename)
            .field(
                "tokens",
                &format_args!("<{} redacted>", self.tokens().len()),
            )
            .finish()
    }
}

impl BearerTokenAuth {
    /// The extension of a [validated](BearerTokenAuthConfig::validate) `config`. With
    /// `filename` the file is read now; it must hold at least one token.
    pub fn new(config: &BearerTokenAuthConfig) -> Result<Self, TokenFileError> {
        let header =
            HeaderName::from_bytes(config.header.as_bytes()).unwrap_or(http::header::AUTHORIZATION);
        let (file_content, tokens) = match &config.filename {
            Some(path) => {
                if config.token.is_some() || !config.tokens.is_empty() {
                    tracing::warn!(
                        filename = %path.display(),
                        "bearertokenauth: a filename is set; the configured token(s) are ignored"
                    );
                }
                token_file::read_tokens(path)?
            }
            None if !config.tokens.is_empty() => (Vec::new(), config.tokens.clone()),
            None => (Vec::new(), config.token.iter().cloned().collect()),
        };
        Ok(BearerTokenAuth {
            scheme: config.scheme.clone(),
            header,
            filename: config.filename.clone(),
            tokens: RwLock::new(tokens.into()),
            file_content,
        })
    }

    /// The `bearer_token: <token>` shorthand of the OTLP receivers: `Authorization: Bearer
    /// <token>`.
    pub fn single_token(token: &str) -> Self {
        BearerTokenAuth {
            scheme: "Bearer".into(),
            header: http::header::AUTHORIZATION,
            filename: None,
            tokens: RwLock::new(vec![token.to_string()].into()),
            file_content: Vec::new(),
        }
    }

    /// The scheme (`Bearer` by default; may be empty).
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The header carrying the value.
    pub fn header(&self) -> &HeaderName {
        &self.header
    }

    /// The token file, when the tokens come from one.
    pub fn filename(&self) -> Option<&Path> {
        self.filename.as_deref()
    }

    fn tokens(&self) -> Arc<[String]> {
        self.tokens
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn set_tokens(&self, tokens: Vec<String>) {
        *self
            .tokens
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = tokens.into();
    }

    /// Checks the first value of the header against every token: `<scheme> <token>` (the
    /// scheme compared without regard to case, as RFC 9110 says of auth schemes; surrounding
    /// whitespace ignored), or `<token>` alone when the scheme is empty. Tokens are compared in
    /// constant time.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<(), AuthFailure> {
        let missing = || AuthFailure::Missing(self.header.as_str().to_string());
        let value = headers.get(&self.header).ok_or_else(missing)?;
        let text = value.to_str().map_err(|_| AuthFailure::Mismatch)?.trim();
        if text.is_empty() {
            return Err(missing());
        }
        let presented = if self.scheme.is_empty() {
            text
        } else {
            let Some((scheme, token)) = text.split_once(|c: char| c.is_ascii_whitespace()) else {
                return Err(AuthFailure::Mismatch);
            };
            if !scheme.eq_ignore_ascii_case(&self.scheme) {
                return Err(AuthFailure::Mismatch);
            }
            token.trim()
        };
        let tokens = self.tokens();
        // Every token is compared, so the time does not tell which one matched.
        let matched = tokens.iter().fold(false, |acc, t| {
            acc | constant_time_eq(presented.as_bytes(), t.as_bytes())
        });
        if matched {
            Ok(())
        } else {
            Err(AuthFailure::Mismatch)
        }
    }

    /// The header a client adds to every request: `<scheme> <first token>` (the token alone
    /// with an empty scheme), marked sensitive. `None` when there is no token or the value
    /// cannot be a header value.
    pub fn client_header(&self) -> Option<(HeaderName, HeaderValue)> {
        let tokens = self.tokens();
        let token = tokens.first()?;
        let text = if self.scheme.is_empty() {
            token.clone()
        } else {
            format!("{} {token}", self.scheme)
        };
        let mut value = HeaderValue::from_str(&text).ok()?;
        value.set_sensitive(true);
        Some((self.header.clone(), value))
    }

    /// Re-reads the token file every `every` until `stop` resolves, replacing the tokens when
    /// its content changes (as the Collector's extension watches its file). A file that cannot
    /// be read for a while (being replaced, as Kubernetes does with secrets) keeps the tokens;
    /// a file without a token refuses every request until it has one again. `None` without
    /// `filename`.
    pub fn watch_file<F>(
        self: &Arc<Self>,
        every: Duration,
        stop: F,
    ) -> Option<tokio::task::JoinHandle<()>>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let path = self.filename.clone()?;
        let mut watched = Watched::new(path, self.file_content.clone());
        let auth = Arc::clone(self);
        Some(tokio::spawn(async move {
            tokio::pin!(stop);
            let mut unreadable = false;
            loop {
                tokio::select! {
                    _ = &mut stop => break,
                    _ = tokio::time::sleep(every) => {}
                }
                match watched.poll().await {
                    Poll::Unchanged => unreadable = false,
                    Poll::Changed(tokens) => {
                        unreadable = false;
                        let file = watched.path().display();
                        if tokens.is_empty() {
                            tracing::warn!(%file, "bearertokenauth: the token file holds no token; every request is refused until it has one");
                        } else {
                            tracing::info!(%file, tokens = tokens.len(), "bearertokenauth: token file changed; tokens reloaded");
                        }
                        auth.set_tokens(tokens);
                    }
                    Poll::Unreadable(e) => {
                        if !unreadable {
                            tracing::warn!(file = %watched.path().display(), error = %e, "bearertokenauth: cannot read the token file; keeping the tokens read before");
                        }
                        unreadable = true;
                    }
                }
            }
        }))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> BearerTokenAuthConfig {
        serde_json::from_str(json).unwrap()
    }

    fn headers(name: &str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        h
    }

    #[test]
    fn the_shorthand_checks_one_bearer_token() {
        let a = BearerTokenAuth::single_token("secret");
        assert_eq!(
            a.authenticate(&HeaderMap::new()),
            Err(AuthFailure::Missing("authorization".into()))
        );
        for (value, ok) in [
            ("Bearer secret", true),
            ("bearer secret", true),
            ("BEARER  secret ", true),
            ("Bearer secreT", false),
            ("Bearer secret2", false),
            ("Basic secret", false),
            ("secret", false),
            ("Bearer ", false),
        ] {
            let got = a.authenticate(&headers("authorization", value));
            assert_eq!(got.is_ok(), ok, "{value}");
        }
    }

    #[test]
    fn scheme_header_and_several_tokens() {
        let a = BearerTokenAuth::new(&config(
            r#"{"scheme":"Token","header":"X-Api-Key","tokens":["a1","b2"]}"#,
        ))
        .unwrap();
        assert!(a.authenticate(&headers("x-api-key", "Token b2")).is_ok());
        assert!(a.authenticate(&headers("x-api-key", "Token a1")).is_ok());
        assert_eq!(
            a.authenticate(&headers("x-api-key", "Bearer a1")),
            Err(AuthFailure::Mismatch)
        );
        assert_eq!(
            a.authenticate(&headers("authorization", "Token a1")),
            Err(AuthFailure::Missing("x-api-key".into()))
        );
        let (name, value) = a.client_header().unwrap();
        assert_eq!(
            (name.as_str(), value.to_str().unwrap()),
            ("x-api-key", "Token a1")
        );
        assert!(value.is_sensitive());
        let bare = BearerTokenAuth::new(&config(r#"{"scheme":"","token":"raw"}"#)).unwrap();
        assert!(bare.authenticate(&headers("authorization", "raw")).is_ok());
        assert!(
            bare.authenticate(&headers("authorization", "Bearer raw"))
                .is_err()
        );
        assert_eq!(bare.client_header().unwrap().1, "raw");
        let shown = format!("{a:?}");
        assert!(
            !shown.contains("a1") && shown.contains("<2 redacted>"),
            "{shown}"
        );
        let e = AuthFailure::Mismatch.to_string();
        assert!(!e.contains("a1"));
    }

    #[tokio::test]
    async fn a_changed_file_replaces_the_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "first\n").unwrap();
        let cfg = BearerTokenAuthConfig {
            token: Some("ignored".into()),
            filename: Some(path.clone()),
            ..Default::default()
        };
        let a = Arc::new(BearerTokenAuth::new(&cfg).unwrap());
        let h = |t: &str| headers("authorization", &format!("Bearer {t}"));
        assert!(a.authenticate(&h("first")).is_ok());
        assert!(a.authenticate(&h("ignored")).is_err());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = a
            .watch_file(Duration::from_millis(10), async {
                let _ = stopped.await;
            })
            .unwrap();
        std::fs::write(&path, "second\nthird\n").unwrap();
        let waited = tokio::time::Instant::now();
        while a.authenticate(&h("third")).is_err() {
            assert!(waited.elapsed() < Duration::from_secs(5), "not reloaded");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(a.authenticate(&h("first")).is_err());
        assert_eq!(a.client_header().unwrap().1, "Bearer second");
        // Gone for a while: the tokens stay.
        std::fs::remove_file(&path).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(a.authenticate(&h("second")).is_ok());
        // Emptied: nothing is accepted.
        std::fs::write(&path, "\n").unwrap();
        let waited = tokio::time::Instant::now();
        while a.authenticate(&h("second")).is_ok() {
            assert!(waited.elapsed() < Duration::from_secs(5), "not reloaded");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(a.client_header().is_none());
        let _ = stop.send(());
        task.await.unwrap();
        let fixed = Arc::new(BearerTokenAuth::single_token("x"));
        assert!(fixed.watch_file(Duration::from_secs(1), async {}).is_none());
    }
}
