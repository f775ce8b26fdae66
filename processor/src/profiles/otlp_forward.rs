//! Route OTLP forwarded: received OTLP handed on as OTLP to the `otlp` exporters (a gateway),
//! less the profiler sessions `profile_sampling` drops.

use super::chain::Chain;
use crate::counters::ServiceCounters;
use crate::export::{ProfileExporter, export_all};
use crate::translation::profile_count;
use profilink_consumer::ConsumeError;
use profilink_proto::otlp::{ExportProfilesServiceRequest, ProfilesData};
use profilink_translator::otlp_to_sentry::resource_profiler_id;
use std::sync::Arc;

/// The OTLP exporters of one pipeline: the OTLP-forwarding route, and where the Sentry → OTLP
/// route hands its requests.
#[derive(Debug)]
pub(crate) struct OtlpForward {
    exporters: Vec<Arc<ProfileExporter>>,
    counters: Arc<ServiceCounters>,
}

impl OtlpForward {
    /// The route to `exporters` (at least one).
    pub(crate) fn new(
        exporters: Vec<Arc<ProfileExporter>>,
        counters: Arc<ServiceCounters>,
    ) -> Self {
        OtlpForward {
            exporters,
            counters,
        }
    }

    /// Samples `data` by session and hands it to the exporters.
    pub(crate) async fn consume(
        &self,
        mut data: ProfilesData,
        chain: &Chain,
    ) -> Result<(), ConsumeError> {
        if chain.samples() {
            let dict = data.dictionary.clone();
            let mut dropped = 0;
            data.resource_profiles.retain(|rp| {
                let keep = chain.keep(&resource_profiler_id(dict.as_ref(), rp));
                if !keep {
                    dropped += profile_count(rp);
                }
                keep
            });
            ServiceCounters::add(&self.counters.sampling_dropped_profiles, dropped);
        }
        self.export(profilink_proto::otlp::request_from_data(data))
            .await
    }

    /// Hands `req` to every OTLP exporter (nothing when it holds no profiles).
    pub(crate) async fn export(
        &self,
        req: ExportProfilesServiceRequest,
    ) -> Result<(), ConsumeError> {
        if req.resource_profiles.is_empty() {
            return Ok(());
        }
        export_all(&self.exporters, req).await
    }
}
