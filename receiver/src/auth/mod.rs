//! Authentication of requests, as the Collector's `auth:` settings and its `bearertokenauth`
//! extension do it.
//!
//! * [`BearerTokenAuthConfig`]: `extensions.bearertokenauth[/name]` (`scheme`, `token`,
//!   `tokens`, `filename`, `header`), checked by [`BearerTokenAuthConfig::validate`].
//! * [`BearerTokenAuth`]: the running extension. Server side it checks a request's header
//!   against every configured token ([`BearerTokenAuth::authenticate`]); client side it gives
//!   the header to add to every request ([`BearerTokenAuth::client_header`]). With `filename`
//!   the tokens are re-read when the file changes ([`BearerTokenAuth::watch_file`]).
//! * [`AuthSettings`]: `auth: { authenticator: bearertokenauth[/name] }` on a receiver
//!   protocol or an exporter; the service resolves the id into an [`Authenticator`] and sets
//!   it on the receiver's config (`authenticator`).
//!
//! Tokens are never logged and never part of an error message.

mod bearer_token;
mod config;
mod token_file;

pub use bearer_token::{AuthFailure, BearerTokenAuth};
pub use config::{AuthSettings, BearerTokenAuthConfig};
pub use token_file::TokenFileError;

use std::fmt;
use std::sync::Arc;

/// A server authenticator resolved from an `auth.authenticator` id: the id (for logs) and the
/// running extension. Two are equal when they are the same extension instance.
#[derive(Clone)]
pub struct Authenticator {
    id: Arc<str>,
    auth: Arc<BearerTokenAuth>,
}

impl Authenticator {
    /// The extension `auth` under its component id `id` (`bearertokenauth/in`).
    pub fn new(id: &str, auth: Arc<BearerTokenAuth>) -> Self {
        Authenticator {
            id: Arc::from(id),
            auth,
        }
    }

    /// The component id of the extension.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The running extension.
    pub fn auth(&self) -> &Arc<BearerTokenAuth> {
        &self.auth
    }
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Authenticator").field(&self.id).finish()
    }
}

impl PartialEq for Authenticator {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && Arc::ptr_eq(&self.auth, &other.auth)
    }
}

impl Eq for Authenticator {}

/// What a listener checks, from its config: `auth` resolved to an [`Authenticator`], or the
/// `bearer_token` shorthand (a `bearertokenauth` with one token and the defaults).
#[derive(Debug, Clone)]
pub(crate) enum ListenerAuth {
    /// Every request is accepted.
    Open,
    /// Requests must pass this check.
    Check(Arc<BearerTokenAuth>),
    /// `auth` names an authenticator that was not resolved: every request is refused (a
    /// misconfigured listener fails closed; the `serve_*` functions refuse to start).
    Unresolved(Arc<str>),
}

impl ListenerAuth {
    /// The check of a listener with `auth`, the resolved `authenticator` and the `bearer_token`
    /// shorthand.
    pub(crate) fn new(
        auth: Option<&AuthSettings>,
        authenticator: Option<&Authenticator>,
        bearer_token: Option<&str>,
    ) -> Self {
        match (auth, authenticator, bearer_token) {
            (_, Some(a), _) => ListenerAuth::Check(a.auth.clone()),
            (Some(s), None, _) => ListenerAuth::Unresolved(Arc::from(s.authenticator.as_str())),
            (None, None, Some(token)) => {
                ListenerAuth::Check(Arc::new(BearerTokenAuth::single_token(token)))
            }
            (None, None, None) => ListenerAuth::Open,
        }
    }

    /// Why the listener cannot start, if it cannot.
    pub(crate) fn start_error(&self) -> Option<String> {
        match self {
            ListenerAuth::Unresolved(id) => Some(format!(
                "auth.authenticator: {id} was not resolved to a running authenticator"
            )),
            _ => None,
        }
    }

    /// `Ok` when the request with `headers` may go on; else the failure to answer with.
    pub(crate) fn check(&self, headers: &http::HeaderMap) -> Result<(), AuthFailure> {
        match self {
            ListenerAuth::Open => Ok(()),
            ListenerAuth::Check(a) => a.authenticate(headers),
            ListenerAuth::Unresolved(_) => Err(AuthFailure::Unresolved),
        }
    }

    /// The scheme to name in `WWW-Authenticate` (`Bearer` unless configured otherwise).
    pub(crate) fn scheme(&self) -> &str {
        match self {
            ListenerAuth::Check(a) if !a.scheme().is_empty() => a.scheme(),
            _ => "Bearer",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    #[test]
    fn listener_auth_from_config() {
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer t".parse().unwrap());
        assert!(ListenerAuth::new(None, None, None).check(&h).is_ok());
        let alias = ListenerAuth::new(None, None, Some("t"));
        assert!(alias.check(&h).is_ok());
        assert!(ListenerAuth::new(None, None, Some("u")).check(&h).is_err());
        let settings = AuthSettings {
            authenticator: "bearertokenauth/in".into(),
        };
        let unresolved = ListenerAuth::new(Some(&settings), None, None);
        assert_eq!(unresolved.check(&h), Err(AuthFailure::Unresolved));
        assert!(
            unresolved
                .start_error()
                .unwrap()
                .contains("bearertokenauth/in")
        );
        let a = Authenticator::new(
            "bearertokenauth/in",
            Arc::new(BearerTokenAuth::single_token("t")),
        );
        assert_eq!(format!("{a:?}"), "Authenticator(\"bearertokenauth/in\")");
        assert_eq!(a, a.clone());
        let resolved = ListenerAuth::new(Some(&settings), Some(&a), None);
        assert!(resolved.check(&h).is_ok());
        assert!(resolved.start_error().is_none());
    }
}
