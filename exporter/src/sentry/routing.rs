//! DSN routing: one default DSN, plus an optional map from a resource attribute's value to DSNs.
//!
//! Chunks are queued with their routing key (the attribute value when it is mapped, else the
//! empty string for the default DSN); a key that is no longer configured after a restart falls
//! back to the default DSN.

use super::config::RoutingConfig;
use crate::http::RateLimits;
use crate::queue_config::SettingError;
use crate::start_error::StartError;
use crate::{SDK_NAME, VERSION};
use sentry_types::{Auth, Dsn};
use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};

/// One destination: a DSN with its endpoint, auth header and rate-limit state.
#[derive(Debug)]
pub struct Route {
    /// Routing key (empty for the default DSN).
    pub key: String,
    /// The DSN as configured.
    pub dsn: String,
    /// `{scheme}://{host}[:port]{path}api/{project_id}/envelope/`.
    pub url: String,
    /// The `X-Sentry-Auth` header value.
    pub auth: String,
    /// The DSN's project id, when numeric (as Sentry's are).
    pub project_id: Option<u64>,
    limits: Mutex<RateLimits>,
}

impl Route {
    /// Parses `dsn` into a route.
    pub fn new(key: &str, dsn: &str) -> Result<Self, StartError> {
        let parsed = Dsn::from_str(dsn.trim())
            .map_err(|e| StartError::invalid(format!("DSN {dsn:?}"), e))?;
        let client = format!("{SDK_NAME}/{VERSION}");
        let auth = Auth::from_pairs([
            ("sentry_key", parsed.public_key()),
            ("sentry_version", "7"),
            ("sentry_client", client.as_str()),
        ])
        .map_err(|e| StartError::invalid(format!("DSN {dsn:?}"), e))?;
        Ok(Route {
            key: key.to_string(),
            dsn: dsn.trim().to_string(),
            url: parsed.envelope_api_url().to_string(),
            auth: auth.to_string(),
            project_id: parsed.project_id().value().parse().ok(),
            limits: Mutex::new(RateLimits::default()),
        })
    }

    /// The rate limits of this DSN.
    pub(crate) fn limits(&self) -> MutexGuard<'_, RateLimits> {
        self.limits.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Chooses the route of a chunk.
#[derive(Debug)]
pub struct Router {
    attribute: Option<String>,
    routes: HashMap<String, Arc<Route>>,
    default: Arc<Route>,
}

impl Router {
    /// Builds the routes; every DSN must parse.
    pub fn new(default_dsn: &str, routing: Option<&RoutingConfig>) -> Result<Self, StartError> {
        let default = Arc::new(Route::new("", default_dsn)?);
        let mut routes = HashMap::new();
        let mut attribute = None;
        if let Some(r) = routing {
            attribute = Some(r.attribute.clone());
            for (value, dsn) in &r.dsns {
                if value.is_empty() {
                    return Err(SettingError::new(
                        "routing.dsns",
                        "an empty attribute value cannot be routed",
                    )
                    .into());
                }
                routes.insert(value.clone(), Arc::new(Route::new(value, dsn)?));
            }
        }
        Ok(Router {
            attribute,
            routes,
            default,
        })
    }

    /// The routing key for a chunk with these resource attributes.
    pub fn key_for(&self, resource: &BTreeMap<String, String>) -> String {
        self.attribute
            .as_ref()
            .and_then(|a| resource.get(a))
            .filter(|v| self.routes.contains_key(v.as_str()))
            .cloned()
            .unwrap_or_default()
    }

    /// The route of `key` (the default for unknown keys).
    pub fn route(&self, key: &str) -> &Arc<Route> {
        self.routes.get(key).unwrap_or(&self.default)
    }

    /// Every route, default first.
    pub fn all(&self) -> Vec<Arc<Route>> {
        let mut v = vec![self.default.clone()];
        let mut others: Vec<_> = self.routes.values().cloned().collect();
        others.sort_by(|a, b| a.key.cmp(&b.key));
        v.extend(others);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn builds_url_and_auth() {
        let r = Route::new("", &format!("http://{KEY}@127.0.0.1:9000/sub/42")).unwrap();
        assert_eq!(r.url, "http://127.0.0.1:9000/sub/api/42/envelope/");
        assert_eq!(
            r.auth,
            format!("Sentry sentry_key={KEY}, sentry_version=7, sentry_client=profilink/{VERSION}")
        );
        let r = Route::new("", &format!("https://{KEY}@o1.ingest.sentry.io/7")).unwrap();
        assert_eq!(r.url, "https://o1.ingest.sentry.io/api/7/envelope/");
        assert!(Route::new("", "not a dsn").is_err());
        assert!(Route::new("", "https://host/1").is_err());
    }

    #[test]
    fn routes_by_attribute() {
        let cfg = RoutingConfig {
            attribute: "service.name".into(),
            dsns: [("checkout".to_string(), format!("https://{KEY}@b.example/2"))].into(),
        };
        let router = Router::new(&format!("https://{KEY}@a.example/1"), Some(&cfg)).unwrap();
        let mut res = BTreeMap::new();
        assert_eq!(router.key_for(&res), "");
        res.insert("service.name".to_string(), "checkout".to_string());
        assert_eq!(router.key_for(&res), "checkout");
        assert!(router.route("checkout").url.contains("b.example"));
        res.insert("service.name".to_string(), "other".to_string());
        assert_eq!(router.key_for(&res), "");
        assert!(router.route("gone").url.contains("a.example"));
        assert_eq!(router.all().len(), 2);
    }
}
