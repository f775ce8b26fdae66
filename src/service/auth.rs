//! The `bearertokenauth` extensions while the service runs (started with the extensions, token
//! files re-read every second until the service stops), and the `auth:` settings they serve:
//! receivers get the [`Authenticator`] their listeners check, OTLP exporters the header they
//! add to every request (asked for at each request, so that it follows the token file).

use super::components::{ExporterSpec, ExtensionSpec, Plan, ReceiverSpec};
use super::error::ServiceError;
use super::stop::waiter;
use axum::http::{HeaderName, HeaderValue};
use profilink_exporter::{AuthSlot, ClientAuth};
use profilink_receiver::auth::{Authenticator, BearerTokenAuth};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The running `bearertokenauth` extensions, by id.
pub type Authenticators = BTreeMap<String, Arc<BearerTokenAuth>>;

/// How often a token file is read again to notice a change.
const TOKEN_FILE_POLL: Duration = Duration::from_secs(1);

/// Starts the `bearertokenauth` extensions listed in `service.extensions`; their token files
/// are watched until `stop` says stop.
pub fn start_authenticators(
    plan: &Plan,
    stop: &watch::Receiver<bool>,
) -> Result<Authenticators, ServiceError> {
    let mut out = Authenticators::new();
    for id in &plan.config.service.extensions {
        let Some(ExtensionSpec::BearerTokenAuth(c)) = plan.components.extensions.get(id) else {
            continue;
        };
        let auth = BearerTokenAuth::new(c).map_err(|source| ServiceError::Authenticator {
            id: id.clone(),
            source,
        })?;
        let auth = Arc::new(auth);
        // Detached: the task ends when `stop` says stop.
        let _ = auth.watch_file(TOKEN_FILE_POLL, waiter(stop));
        match auth.filename() {
            Some(f) => {
                tracing::info!(extension = %id, file = %f.display(), "bearer token authenticator ready (tokens re-read when the file changes)")
            }
            None => tracing::info!(extension = %id, "bearer token authenticator ready"),
        }
        out.insert(id.clone(), auth);
    }
    Ok(out)
}

/// `spec` with the authenticator of each listener's `auth` set (a listener whose authenticator
/// is not running refuses to start).
pub fn with_receiver_auth(spec: &ReceiverSpec, auths: &Authenticators) -> ReceiverSpec {
    let resolve = |id: &str| auths.get(id).map(|a| Authenticator::new(id, a.clone()));
    let mut spec = spec.clone();
    if let ReceiverSpec::Otlp { grpc, http } = &mut spec {
        if let Some(c) = grpc {
            c.authenticator = c.auth.as_ref().and_then(|a| resolve(&a.authenticator));
        }
        if let Some(c) = http {
            c.authenticator = c.auth.as_ref().and_then(|a| resolve(&a.authenticator));
        }
    }
    spec
}

/// The header of a running `bearertokenauth` extension, as an OTLP exporter's [`ClientAuth`]:
/// its first token now, following its token file.
struct ExtensionAuth {
    id: String,
    auth: Arc<BearerTokenAuth>,
}

impl ClientAuth for ExtensionAuth {
    fn header(&self) -> Option<(HeaderName, HeaderValue)> {
        self.auth.client_header()
    }

    fn name(&self) -> String {
        self.id.clone()
    }
}

/// `spec` of exporter `id` with the header of its `auth` (replacing a configured header of the
/// same name), for the profiles and the traces instance alike. The exporter asks for the
/// header at every request, so a rotated token file takes effect without a restart; the
/// extension must have a token when the exporter starts.
pub fn with_exporter_auth(
    id: &str,
    spec: &ExporterSpec,
    plan: &Plan,
    auths: &Authenticators,
) -> Result<ExporterSpec, ServiceError> {
    let Some(settings) = plan.components.exporter_auth.get(id) else {
        return Ok(spec.clone());
    };
    let at = format!("exporters.{id}.auth.authenticator");
    let ExporterSpec::Otlp(c) = spec else {
        return Err(ServiceError::Auth(format!(
            "{at}: only OTLP exporters take auth"
        )));
    };
    let name = &settings.authenticator;
    let auth = auths
        .get(name)
        .ok_or_else(|| ServiceError::Auth(format!("{at}: {name} is not running")))?;
    let (header, value) = auth
        .client_header()
        .ok_or_else(|| ServiceError::Auth(format!("{at}: {name} has no token to send")))?;
    if value.to_str().is_err() {
        return Err(ServiceError::Auth(format!(
            "{at}: {name}: the token is not text"
        )));
    }
    let mut c = c.clone();
    if c.headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case(header.as_str()))
    {
        tracing::warn!(exporter = %id, header = %header, "auth replaces the configured header of the same name");
    }
    if c.tls.insecure || c.endpoint.starts_with("http://") {
        tracing::warn!(exporter = %id, "auth: the token is sent without TLS (the Collector refuses this for gRPC)");
    }
    c.auth = AuthSlot::new(Arc::new(ExtensionAuth {
        id: name.clone(),
        auth: auth.clone(),
    }));
    Ok(ExporterSpec::Otlp(c))
}
