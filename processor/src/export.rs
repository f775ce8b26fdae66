//! [`Exporter`]: one running exporter by its component id, shared by every pipeline that lists
//! it, driven through the contract's [`Export`] (which each exporter implements itself): chunk
//! exporters (`sentry`, `file`: `Vec<ExportChunk>`), OTLP profiles exporters (`otlp`:
//! [`ExportProfilesServiceRequest`]) and traces exporters ([`ExportTraceServiceRequest`]).
//!
//! The data type is part of the exporter's type, so a pipeline can only hand an exporter what
//! it takes.

use crate::each::each;
use profilink_consumer::{ConsumeError, Export, ExportChunk, ExportError};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::otlp::ExportTraceServiceRequest;
use std::time::Duration;

/// A running exporter of `T` with its component id.
pub struct Exporter<T> {
    id: String,
    inner: Box<dyn Export<T>>,
    routing_attribute: Option<String>,
}

/// An exporter of Sentry chunks (`sentry`, `file`).
pub type ChunkExporter = Exporter<Vec<ExportChunk>>;
/// An exporter of OTLP profiles requests (`otlp`, `otlp_http`).
pub type ProfileExporter = Exporter<ExportProfilesServiceRequest>;
/// An exporter of OTLP traces requests (the traces instance of `sentry`, `otlp`, `otlp_http`).
pub type TraceExporter = Exporter<ExportTraceServiceRequest>;

impl<T> std::fmt::Debug for Exporter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter").field("id", &self.id).finish()
    }
}

impl<T> Exporter<T> {
    /// The exporter `id` over `inner`.
    pub fn new(id: &str, inner: impl Export<T> + 'static) -> Self {
        Exporter {
            id: id.to_string(),
            inner: Box::new(inner),
            routing_attribute: None,
        }
    }

    /// Names the resource attribute this exporter routes chunks by (a `sentry` exporter with
    /// `routing`): pipelines keep it on every chunk they hand over.
    pub fn with_routing_attribute(mut self, attribute: Option<String>) -> Self {
        self.routing_attribute = attribute;
        self
    }

    /// The component id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The resource attribute this exporter routes chunks by, if it routes.
    pub fn routing_attribute(&self) -> Option<&str> {
        self.routing_attribute.as_deref()
    }

    /// See [`Export::is_full`].
    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }

    /// See [`Export::export`].
    pub async fn export(&self, data: T) -> Result<(), ExportError> {
        self.inner.export(data).await
    }

    /// Exports `data` and maps a refusal to what the receiver answers its client.
    pub async fn export_for_client(&self, data: T) -> Result<(), ConsumeError> {
        self.inner
            .export(data)
            .await
            .map_err(|e| consume_error(&self.id, e))
    }

    /// See [`Export::shutdown`].
    pub async fn shutdown(self, deadline: Duration) {
        self.inner.shutdown(deadline).await
    }
}

/// Maps an exporter error to the receivers' consume error.
pub(crate) fn consume_error(id: &str, e: ExportError) -> ConsumeError {
    match e {
        ExportError::Full { retry_after } => ConsumeError::Full { retry_after },
        ExportError::Closed => ConsumeError::ExporterClosed {
            exporter: id.to_owned(),
        },
        e @ ExportError::TooLarge { .. } => ConsumeError::Rejected(format!("exporter {id}: {e}")),
        source => ConsumeError::Export {
            exporter: id.to_owned(),
            source,
        },
    }
}

/// Hands `data` to every exporter in order (a clone to each but the last), stopping at the
/// first refusal.
pub async fn export_all<T: Clone>(
    exporters: &[std::sync::Arc<Exporter<T>>],
    data: T,
) -> Result<(), ConsumeError> {
    for (e, d) in each(exporters, data) {
        e.export_for_client(d).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_consumer::BoxFuture;
    use std::sync::{Arc, Mutex};

    /// Takes numbers; refuses as told.
    #[derive(Default)]
    struct Numbers {
        got: Arc<Mutex<Vec<u32>>>,
        refuse: Option<Duration>,
    }

    impl Export<u32> for Numbers {
        fn export(&self, data: u32) -> BoxFuture<'_, Result<(), ExportError>> {
            Box::pin(async move {
                if let Some(retry_after) = self.refuse {
                    return Err(ExportError::Full { retry_after });
                }
                self.got.lock().unwrap().push(data);
                Ok(())
            })
        }

        fn shutdown(self: Box<Self>, _deadline: Duration) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn exporters_hand_over_and_map_refusals() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let a = Arc::new(Exporter::new(
            "a",
            Numbers {
                got: got.clone(),
                refuse: None,
            },
        ));
        let b = Arc::new(Exporter::new(
            "b",
            Numbers {
                got: got.clone(),
                refuse: None,
            },
        ));
        export_all(&[a.clone(), b], 7).await.unwrap();
        assert_eq!(*got.lock().unwrap(), vec![7, 7]);

        let full = Arc::new(Exporter::new(
            "full",
            Numbers {
                got: got.clone(),
                refuse: Some(Duration::from_secs(3)),
            },
        ));
        let e = export_all(&[full, a], 8).await.unwrap_err();
        assert!(
            matches!(e, ConsumeError::Full { retry_after } if retry_after == Duration::from_secs(3)),
            "{e:?}"
        );
        assert_eq!(got.lock().unwrap().len(), 2, "stops at the first refusal");
    }
}
