//! Sentry request authentication, following Relay's `auth_from_parts` and the `sentry-types`
//! `Auth` grammar.
//!
//! A request authenticates with exactly one of:
//!
//! 1. `X-Sentry-Auth: Sentry sentry_key=<key>, sentry_version=7, sentry_client=<name/ver>` (the
//!    `Sentry ` prefix is matched case-insensitively; a header without it is ignored);
//! 2. `Authorization: Sentry …` (same grammar);
//! 3. `Authorization: Basic base64(<key>:<anything>)` (undecodable values are ignored);
//! 4. a query string containing `sentry_` (`?sentry_key=<key>&sentry_version=7`);
//! 5. only when none of the above is present: the envelope header `dsn`
//!    (`https://<key>[:secret]@host[:port][/path]/<project_id>`).
//!
//! | problem | status |
//! |---|---|
//! | none of the above | 401 |
//! | more than one of 1–4 | 401 |
//! | an auth value that does not parse (no `sentry_key`, bad `sentry_version`) | 401 |
//! | envelope `dsn` unparsable, or its key malformed | 401 |
//! | key not exactly 32 ASCII characters (optional `.flag` suffixes are stripped first) | 400 |
//! | `sentry_version` above 7 | 400 |
//! | envelope `dsn` naming another project or key than the request | 400 |
//! | key not in the project's allow-list | 401 |

use axum::http::StatusCode;
use base64::Engine;
use http::HeaderMap;
use http::header::AUTHORIZATION;
use thiserror::Error;

/// The newest Sentry protocol version; higher versions are refused.
pub const PROTOCOL_VERSION: u16 = 7;

/// The authentication a request carried.
#[derive(Clone, PartialEq, Eq)]
pub struct SentryAuth {
    /// The public key (`sentry_key`), as sent (flags not yet stripped).
    pub public_key: String,
    /// `sentry_version` (7 when absent).
    pub version: u16,
    /// `sentry_client`, e.g. `sentry.python/2.75.0`.
    pub client: Option<String>,
}

impl std::fmt::Debug for SentryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print keys.
        f.debug_struct("SentryAuth")
            .field("public_key", &"<redacted>")
            .field("version", &self.version)
            .field("client", &self.client)
            .finish()
    }
}

/// An authentication failure, with Relay's status code ([`AuthError::status`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
    /// No authentication at all.
    #[error("missing authorization information")]
    Missing,
    /// More than one authentication source.
    #[error("multiple authorization payloads detected")]
    Multiple,
    /// An auth header or query that does not parse.
    #[error("bad sentry auth: {0}")]
    Malformed(&'static str),
    /// The envelope header `dsn` does not parse.
    #[error("bad envelope authentication header: {0}")]
    BadEnvelopeDsn(String),
    /// The public key is not 32 ASCII characters.
    #[error("bad sentry DSN public key")]
    BadPublicKey,
    /// `sentry_version` is newer than 7.
    #[error("unsupported protocol version ({0})")]
    UnsupportedVersion(u16),
    /// The envelope header `dsn` names another project or key than the request.
    #[error("envelope header does not match the request: {0}")]
    HeaderMismatch(&'static str),
    /// The key is not allowed for the project.
    #[error("public key is not allowed for this project")]
    NotAllowed,
}

impl AuthError {
    /// The HTTP status Relay answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            AuthError::Missing
            | AuthError::Multiple
            | AuthError::Malformed(_)
            | AuthError::BadEnvelopeDsn(_)
            | AuthError::NotAllowed => StatusCode::UNAUTHORIZED,
            AuthError::BadPublicKey
            | AuthError::UnsupportedVersion(_)
            | AuthError::HeaderMismatch(_) => StatusCode::BAD_REQUEST,
        }
    }
}

/// Reads the request's own authentication (sources 1–4). `Ok(None)`: the request has none, and
/// the envelope's `dsn` header may supply it.
pub fn auth_from_request(
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Option<SentryAuth>, AuthError> {
    let mut auth: Option<SentryAuth> = None;
    if let Some(value) = sentry_header(headers, "x-sentry-auth") {
        auth = Some(parse_auth_header(value)?);
    }
    if let Some(value) = sentry_header(headers, AUTHORIZATION.as_str()) {
        if auth.is_some() {
            return Err(AuthError::Multiple);
        }
        auth = Some(parse_auth_header(value)?);
    }
    if let Some(key) = basic_auth_key(headers) {
        if auth.is_some() {
            return Err(AuthError::Multiple);
        }
        auth = Some(from_pairs([("sentry_key".to_string(), key)])?);
    }
    let query = query.unwrap_or("");
    if query.contains("sentry_") {
        if auth.is_some() {
            return Err(AuthError::Multiple);
        }
        let pairs =
            form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned()));
        auth = Some(from_pairs(pairs)?);
    }
    Ok(auth)
}

fn sentry_header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .filter(|h| h.len() >= 7 && h.as_bytes()[..7].eq_ignore_ascii_case(b"sentry "))
}

fn basic_auth_key(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    if value.len() < 6 || !value.as_bytes()[..6].eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(value.get(6..)?.trim().as_bytes())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (key, _) = text.split_once(':')?;
    Some(key.to_string())
}

/// Parses `Sentry sentry_key=…, sentry_version=…, …`.
pub fn parse_auth_header(value: &str) -> Result<SentryAuth, AuthError> {
    let (prefix, items) = value.split_once(' ').unwrap_or((value, ""));
    if !prefix.eq_ignore_ascii_case("sentry") {
        return Err(AuthError::Malformed("not a Sentry auth header"));
    }
    let pairs = items.split(',').filter_map(|item| {
        let mut kv = item.split('=');
        Some((kv.next()?.trim().to_string(), kv.next()?.trim().to_string()))
    });
    from_pairs(pairs)
}

fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Result<SentryAuth, AuthError> {
    let mut auth = SentryAuth {
        public_key: String::new(),
        version: PROTOCOL_VERSION,
        client: None,
    };
    for (key, value) in pairs {
        match key.as_str() {
            "sentry_key" => auth.public_key = value,
            "sentry_version" => {
                auth.version = value
                    .split('.')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or(AuthError::Malformed("invalid value for sentry_version"))?;
            }
            "sentry_client" => auth.client = Some(value),
            _ => {}
        }
    }
    if auth.public_key.is_empty() {
        return Err(AuthError::Malformed("missing sentry_key"));
    }
    Ok(auth)
}

/// Relay's `ProjectKey::parse_with_flags`: the part before the first `.` must be exactly 32
/// ASCII characters. Returns that part.
pub fn project_key(key: &str) -> Result<&str, AuthError> {
    let base = key.split('.').next().unwrap_or("");
    if base.len() == 32 && base.is_ascii() {
        Ok(base)
    } else {
        Err(AuthError::BadPublicKey)
    }
}

/// The parts of a DSN that authentication uses.
#[derive(Clone, PartialEq, Eq)]
pub struct Dsn {
    /// The public key.
    pub public_key: String,
    /// The project id (the last path segment).
    pub project_id: u64,
}

impl std::fmt::Debug for Dsn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dsn")
            .field("public_key", &"<redacted>")
            .field("project_id", &self.project_id)
            .finish()
    }
}

/// Parses `{http|https}://{public_key}[:{secret}]@{host}[:{port}]{/path}/{project_id}`.
pub fn parse_dsn(dsn: &str) -> Result<Dsn, &'static str> {
    let (scheme, rest) = dsn.split_once("://").ok_or("not a URL")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err("unsupported scheme");
    }
    let (userinfo, host_and_path) = rest.split_once('@').ok_or("no public key")?;
    let public_key = userinfo.split(':').next().unwrap_or("");
    if public_key.is_empty() {
        return Err("no public key");
    }
    let (host, path) = host_and_path.split_once('/').ok_or("no project id")?;
    if host.is_empty() {
        return Err("no host");
    }
    let path = path.split(['?', '#']).next().unwrap_or("");
    let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    let project_id = last.parse().map_err(|_| "no project id")?;
    Ok(Dsn {
        public_key: public_key.to_string(),
        project_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn sources() {
        let h = headers(&[(
            "x-sentry-auth",
            &format!(
                "Sentry sentry_key={KEY}, sentry_version=7, sentry_client=sentry.python/2.75.0"
            ),
        )]);
        let a = auth_from_request(&h, None).unwrap().unwrap();
        assert_eq!(a.public_key, KEY);
        assert_eq!(a.version, 7);
        assert_eq!(a.client.as_deref(), Some("sentry.python/2.75.0"));

        let h = headers(&[("authorization", &format!("sentry sentry_key={KEY}"))]);
        assert_eq!(
            auth_from_request(&h, None).unwrap().unwrap().public_key,
            KEY
        );

        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{KEY}:"));
        let h = headers(&[("authorization", &format!("Basic {basic}"))]);
        assert_eq!(
            auth_from_request(&h, None).unwrap().unwrap().public_key,
            KEY
        );

        let q = format!("sentry_key={KEY}&sentry_version=7");
        let a = auth_from_request(&HeaderMap::new(), Some(&q))
            .unwrap()
            .unwrap();
        assert_eq!(a.public_key, KEY);

        assert_eq!(auth_from_request(&HeaderMap::new(), None), Ok(None));
        assert_eq!(auth_from_request(&HeaderMap::new(), Some("a=b")), Ok(None));
        // Headers without the `Sentry ` prefix are not auth.
        let h = headers(&[("x-sentry-auth", "Bearer x")]);
        assert_eq!(auth_from_request(&h, None), Ok(None));
    }

    #[test]
    fn failures() {
        let xsa = format!("Sentry sentry_key={KEY}");
        let h = headers(&[("x-sentry-auth", &xsa), ("authorization", &xsa)]);
        assert_eq!(auth_from_request(&h, None), Err(AuthError::Multiple));
        let h = headers(&[("x-sentry-auth", &xsa)]);
        assert_eq!(
            auth_from_request(&h, Some(&format!("sentry_key={KEY}"))),
            Err(AuthError::Multiple)
        );
        let h = headers(&[("x-sentry-auth", "Sentry sentry_version=7")]);
        assert!(matches!(
            auth_from_request(&h, None),
            Err(AuthError::Malformed(_))
        ));
        let h = headers(&[("x-sentry-auth", "Sentry sentry_key=k, sentry_version=x")]);
        assert!(matches!(
            auth_from_request(&h, None),
            Err(AuthError::Malformed(_))
        ));
        let h = headers(&[("x-sentry-auth", "Sentry sentry_key=k, sentry_version=8.1")]);
        assert_eq!(auth_from_request(&h, None).unwrap().unwrap().version, 8);
        assert!(matches!(
            auth_from_request(&HeaderMap::new(), Some("sentry_version=7")),
            Err(AuthError::Malformed(_))
        ));
        assert_eq!(AuthError::Multiple.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(AuthError::BadPublicKey.status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn keys_and_dsns() {
        assert_eq!(project_key(KEY), Ok(KEY));
        assert_eq!(project_key(&format!("{KEY}.no-cache")), Ok(KEY));
        assert_eq!(project_key("short"), Err(AuthError::BadPublicKey));
        let d = parse_dsn(&format!("https://{KEY}@o1.ingest.example.com/42")).unwrap();
        assert_eq!((d.public_key.as_str(), d.project_id), (KEY, 42));
        let d = parse_dsn(&format!("http://{KEY}:secret@localhost:9000/sub/path/7/")).unwrap();
        assert_eq!((d.public_key.as_str(), d.project_id), (KEY, 7));
        assert!(parse_dsn("https://host/42").is_err());
        assert!(parse_dsn(&format!("ftp://{KEY}@host/42")).is_err());
        assert!(parse_dsn(&format!("https://{KEY}@host/")).is_err());
        assert!(!format!("{:?}", d).contains(KEY));
    }
}
