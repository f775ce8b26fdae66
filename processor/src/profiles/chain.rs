//! The processors a profiles pipeline runs, in the order its `processors:` lists them (as the
//! Collector's processor chain): `profile_sampling` keeps or drops whole profiler sessions,
//! `symbolize` names native frames of OTLP before any route sees it; `batch` and
//! `profile_linking` are configuration the routes read (the exporters batch; linking configures
//! the join buffer and span stamping).
//!
//! Each route asks the chain where its data is keyed by a profiler id ([`Chain::keep`]):
//! OTLP → chunks after translation (chunks carry the translated session id), OTLP forwarded and
//! Sentry input before anything else.

use crate::sampling::Sampler;
use crate::spec::ProcessorSpec;
use crate::symbolize::SymbolizeStage;
use profilink_consumer::ConsumeError;
use profilink_proto::otlp::ProfilesData;
use profilink_symbolizer::SymbolizerMetrics;
use std::sync::Arc;

/// One processor of the chain that acts on data.
#[derive(Debug)]
enum Step {
    Sample(Sampler),
    Symbolize(SymbolizeStage),
}

/// The processors of one pipeline, in order. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Chain {
    steps: Vec<Step>,
}

impl Chain {
    /// The chain of `processors` (in order). OTLP is symbolized once, by the first `symbolize`
    /// processor listed.
    pub(crate) fn new(processors: &[&ProcessorSpec]) -> Self {
        let mut steps = Vec::new();
        for p in processors {
            match p {
                ProcessorSpec::Sampling(c) => steps.push(Step::Sample(Sampler::new(c))),
                ProcessorSpec::Symbolize(c)
                    if !steps.iter().any(|s| matches!(s, Step::Symbolize(_))) =>
                {
                    steps.push(Step::Symbolize(SymbolizeStage::new(c)))
                }
                _ => {}
            }
        }
        Chain { steps }
    }

    /// Whether the chain samples at all (routes skip the work of asking when it does not).
    pub(crate) fn samples(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, Step::Sample(_)))
    }

    /// Whether every `profile_sampling` processor keeps the session `profiler_id`.
    pub(crate) fn keep(&self, profiler_id: &str) -> bool {
        self.steps.iter().all(|s| match s {
            Step::Sample(sampler) => sampler.keep(profiler_id),
            Step::Symbolize(_) => true,
        })
    }

    /// Runs the steps that transform OTLP (`symbolize`) on `data`.
    pub(crate) async fn process_otlp(
        &self,
        data: ProfilesData,
    ) -> Result<ProfilesData, ConsumeError> {
        let mut data = data;
        for s in &self.steps {
            if let Step::Symbolize(stage) = s {
                data = stage.apply(data).await?;
            }
        }
        Ok(data)
    }

    /// The `symbolize` processor's counters, when the chain has one.
    pub(crate) fn symbolize_metrics(&self) -> Option<Arc<SymbolizerMetrics>> {
        self.steps.iter().find_map(|s| match s {
            Step::Symbolize(stage) => Some(stage.metrics()),
            Step::Sample(_) => None,
        })
    }
}
