//! CORS for the OTLP/HTTP receiver: [`CorsConfig`].

use http::{HeaderName, HeaderValue, Method};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

/// Headers a browser may always send (the Collector's documented implicit list).
const ALWAYS_ALLOWED: [&str; 4] = [
    "accept",
    "accept-language",
    "content-type",
    "content-language",
];

/// `cors:` of the OTLP/HTTP receiver, with the Collector's `confighttp` keys and meaning (which
/// are those of the Go `rs/cors` package it uses), served by tower-http's [`CorsLayer`].
///
/// * `allowed_origins`: origins allowed to send; one `*` in an origin stands for any run of
///   characters (`https://*.example.com`), `*` alone for every origin. Compared without regard
///   to case. Empty (the default): no CORS at all (no headers, `OPTIONS` is 405).
/// * `allowed_headers`: request headers a browser may send besides the always allowed
///   `Accept`, `Accept-Language`, `Content-Type` and `Content-Language`; when empty,
///   `X-Requested-With` too; `*` allows every header.
/// * `max_age`: seconds a browser may cache a preflight answer (`Access-Control-Max-Age`);
///   0 (the default) sends no such header.
///
/// An allowed origin is echoed in `Access-Control-Allow-Origin` with
/// `Access-Control-Allow-Credentials: true` (as the Collector does); a preflight (`OPTIONS`) is
/// answered before authentication with the allowed methods (`GET`, `POST`, `HEAD`) and headers;
/// an origin not allowed gets no `Access-Control-Allow-Origin`, so the browser blocks the call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorsConfig {
    /// Origins allowed to send (`https://app.example.com`, `https://*.example.com`, `*`).
    pub allowed_origins: Vec<String>,
    /// Request headers allowed besides the always allowed ones; `*`: any.
    pub allowed_headers: Vec<String>,
    /// `Access-Control-Max-Age` in seconds; 0: not sent.
    pub max_age: u64,
}

impl CorsConfig {
    /// Checks the settings; the error starts with the key it is about.
    pub fn validate(&self) -> Result<(), String> {
        for (i, o) in self.allowed_origins.iter().enumerate() {
            if o.trim().is_empty() {
                return Err(format!("allowed_origins[{i}]: is empty"));
            }
        }
        for (i, h) in self.allowed_headers.iter().enumerate() {
            if h != "*" && HeaderName::from_bytes(h.as_bytes()).is_err() {
                return Err(format!(
                    "allowed_headers[{i}]: {h:?} is not a valid header name"
                ));
            }
        }
        Ok(())
    }

    /// True when CORS is on (at least one allowed origin).
    pub fn enabled(&self) -> bool {
        !self.allowed_origins.is_empty()
    }

    /// True when the request origin `origin` is allowed.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.to_ascii_lowercase();
        self.allowed_origins
            .iter()
            .any(|allowed| origin_matches(&allowed.to_ascii_lowercase(), &origin))
    }

    /// The layer answering preflights and adding the CORS headers; `None` when no origin is
    /// allowed (a config with headers but no origins is ignored, as the Collector does, with a
    /// warning).
    pub fn layer(&self) -> Option<CorsLayer> {
        if !self.enabled() {
            if !self.allowed_headers.is_empty() {
                tracing::warn!(
                    "cors: allowed_headers are set but allowed_origins is empty; CORS stays off"
                );
            }
            return None;
        }
        let config = Arc::new(self.clone());
        let origins = AllowOrigin::predicate(move |origin: &HeaderValue, _| {
            origin.to_str().is_ok_and(|o| config.origin_allowed(o))
        });
        let headers = if self.allowed_headers.iter().any(|h| h == "*") {
            AllowHeaders::mirror_request()
        } else {
            let extra: Vec<&str> = if self.allowed_headers.is_empty() {
                vec!["x-requested-with"]
            } else {
                self.allowed_headers.iter().map(String::as_str).collect()
            };
            let names = ALWAYS_ALLOWED
                .into_iter()
                .chain(extra)
                .filter_map(|h| HeaderName::from_bytes(h.as_bytes()).ok());
            AllowHeaders::list(names)
        };
        let mut layer = CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([Method::GET, Method::POST, Method::HEAD])
            .allow_headers(headers)
            .allow_credentials(true);
        if self.max_age > 0 {
            layer = layer.max_age(Duration::from_secs(self.max_age));
        }
        Some(layer)
    }
}

/// `origin` (lowercase) against an allowed origin (lowercase) with at most one `*` that stands
/// for any run of characters (a second `*` is literal, as in `rs/cors`).
fn origin_matches(allowed: &str, origin: &str) -> bool {
    if allowed == "*" {
        return true;
    }
    match allowed.split_once('*') {
        None => allowed == origin,
        Some((prefix, suffix)) => {
            origin.len() >= prefix.len() + suffix.len()
                && origin.starts_with(prefix)
                && origin.ends_with(suffix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_match_like_the_collector() {
        let c = CorsConfig {
            allowed_origins: vec![
                "https://*.example.com".into(),
                "http://LOCALHOST:3000".into(),
            ],
            ..Default::default()
        };
        for (origin, ok) in [
            ("https://app.example.com", true),
            ("https://a.b.example.com", true),
            ("HTTPS://APP.EXAMPLE.COM", true),
            ("https://example.com", false),
            ("http://app.example.com", false),
            ("https://app.example.com.evil.org", false),
            ("http://localhost:3000", true),
            ("http://localhost:3001", false),
        ] {
            assert_eq!(c.origin_allowed(origin), ok, "{origin}");
        }
        let any = CorsConfig {
            allowed_origins: vec!["*".into()],
            ..Default::default()
        };
        assert!(any.origin_allowed("https://anything.test"));
        assert!(!CorsConfig::default().enabled());
        assert!(CorsConfig::default().layer().is_none());
        assert!(!origin_matches("https://*.x.com", "https://.x.co"));
    }

    #[test]
    fn validation_names_the_key() {
        let bad = CorsConfig {
            allowed_origins: vec!["https://a".into(), " ".into()],
            ..Default::default()
        };
        assert_eq!(bad.validate(), Err("allowed_origins[1]: is empty".into()));
        let bad = CorsConfig {
            allowed_origins: vec!["*".into()],
            allowed_headers: vec!["X-Ok".into(), "not ok".into()],
            ..Default::default()
        };
        assert_eq!(
            bad.validate(),
            Err("allowed_headers[1]: \"not ok\" is not a valid header name".into())
        );
        let ok: CorsConfig = serde_json::from_str(
            r#"{"allowed_origins":["*"],"allowed_headers":["*"],"max_age":7200}"#,
        )
        .unwrap();
        assert_eq!(ok.validate(), Ok(()));
        assert!(ok.layer().is_some());
        assert!(serde_json::from_str::<CorsConfig>(r#"{"max_age":-1}"#).is_err());
        assert!(serde_json::from_str::<CorsConfig>(r#"{"allowed_origin":[]}"#).is_err());
    }
}
