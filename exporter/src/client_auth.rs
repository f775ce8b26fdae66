//! The authentication header an OTLP exporter adds to each request, asked for at every attempt
//! (a Collector `auth: { authenticator: ... }`): a token file rotated while the service runs,
//! as Kubernetes rotates projected service-account tokens, takes effect on the next request.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::sync::Arc;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};

/// Gives the header to authenticate the next request with (the service's `bearertokenauth`
/// extension, whose tokens follow its file).
///
/// Called once per attempt on the sender's task: implementations must answer at once.
pub trait ClientAuth: Send + Sync + 'static {
    /// The header and its value now; `None` when there is no token to send (an emptied token
    /// file).
    fn header(&self) -> Option<(HeaderName, HeaderValue)>;

    /// Who gives the header, for messages (an extension id such as `bearertokenauth/out`).
    fn name(&self) -> String;
}

/// A config field holding an optional [`ClientAuth`] (not read from YAML; set by the program
/// that starts the exporter). Two slots are equal when they hold the same source.
#[derive(Clone, Default)]
pub struct AuthSlot(pub Option<Arc<dyn ClientAuth>>);

/// Why no header could be added: the attempt is retried later (the token may come back), and
/// nothing is sent without it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("auth {0}: no token to send (is its token file empty?); the request stays queued")]
pub(crate) struct NoToken(pub(crate) String);

impl AuthSlot {
    /// A slot holding `auth`.
    pub fn new(auth: Arc<dyn ClientAuth>) -> Self {
        AuthSlot(Some(auth))
    }

    /// `headers` with the current header set (replacing one of the same name); `headers`
    /// unchanged without an auth source.
    pub(crate) fn http(&self, headers: &HeaderMap) -> Result<HeaderMap, NoToken> {
        let mut out = headers.clone();
        if let Some(auth) = &self.0 {
            let (name, value) = auth.header().ok_or_else(|| NoToken(auth.name()))?;
            out.insert(name, value);
        }
        Ok(out)
    }

    /// `metadata` with the current header set as gRPC metadata (replacing a key of the same
    /// name).
    pub(crate) fn grpc(&self, metadata: &MetadataMap) -> Result<MetadataMap, NoToken> {
        let mut out = metadata.clone();
        if let Some(auth) = &self.0 {
            let no_token = || NoToken(auth.name());
            let (name, value) = auth.header().ok_or_else(no_token)?;
            // Header names are lowercase already; a value that is not visible ASCII cannot be
            // gRPC ASCII metadata, which is as good as having no token.
            let key =
                AsciiMetadataKey::from_bytes(name.as_str().as_bytes()).map_err(|_| no_token())?;
            let mut value =
                AsciiMetadataValue::try_from(value.as_bytes()).map_err(|_| no_token())?;
            value.set_sensitive(true);
            out.insert(key, value);
        }
        Ok(out)
    }
}

impl std::fmt::Debug for AuthSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(a) => write!(f, "AuthSlot({})", a.name()),
            None => f.write_str("AuthSlot(None)"),
        }
    }
}

impl PartialEq for AuthSlot {
    fn eq(&self, other: &Self) -> bool {
        crate::observer::same_arc(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Switch(Mutex<Option<&'static str>>);

    impl ClientAuth for Switch {
        fn header(&self) -> Option<(HeaderName, HeaderValue)> {
            let token = (*self.0.lock().unwrap())?;
            let mut v = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
            v.set_sensitive(true);
            Some((HeaderName::from_static("authorization"), v))
        }

        fn name(&self) -> String {
            "bearertokenauth/test".into()
        }
    }

    #[test]
    fn each_call_reads_the_current_token_and_replaces_a_configured_header() {
        let auth = Arc::new(Switch(Mutex::new(Some("one"))));
        let slot = AuthSlot::new(auth.clone());
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer static"));
        headers.insert("x-tenant", HeaderValue::from_static("a"));
        let mut metadata = MetadataMap::new();
        metadata.insert("authorization", "Bearer static".parse().unwrap());

        let h = slot.http(&headers).unwrap();
        assert_eq!(h["authorization"], "Bearer one");
        assert_eq!(h["x-tenant"], "a");
        assert_eq!(h.len(), 2);
        assert!(h["authorization"].is_sensitive());
        *auth.0.lock().unwrap() = Some("two");
        assert_eq!(slot.http(&headers).unwrap()["authorization"], "Bearer two");
        let m = slot.grpc(&metadata).unwrap();
        assert_eq!(m.get("authorization").unwrap(), "Bearer two");
        assert_eq!(m.len(), 1);

        *auth.0.lock().unwrap() = None;
        let err = slot.http(&headers).unwrap_err();
        assert_eq!(err, NoToken("bearertokenauth/test".into()));
        assert!(slot.grpc(&metadata).is_err());
        assert!(err.to_string().contains("bearertokenauth/test"), "{err}");
    }

    #[test]
    fn without_a_source_headers_pass_unchanged_and_slots_compare_by_identity() {
        let mut headers = HeaderMap::new();
        headers.insert("x-tenant", HeaderValue::from_static("a"));
        assert_eq!(AuthSlot::default().http(&headers).unwrap(), headers);
        let a: Arc<dyn ClientAuth> = Arc::new(Switch(Mutex::new(None)));
        let b: Arc<dyn ClientAuth> = Arc::new(Switch(Mutex::new(None)));
        assert_eq!(AuthSlot::new(a.clone()), AuthSlot::new(a.clone()));
        assert_ne!(AuthSlot::new(a.clone()), AuthSlot::new(b));
        assert_ne!(AuthSlot::new(a), AuthSlot::default());
        assert_eq!(
            format!("{:?}", AuthSlot::default()),
            "AuthSlot(None)".to_string()
        );
    }
}
