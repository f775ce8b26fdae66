//! [`Symbolizer`]: one request's native locations resolved and rewritten, with the caches
//! that outlive requests.

use crate::cache::BoundedCache;
use crate::config::{SourceKind, SymbolizerConfig};
use crate::file_id::ObjectId;
use crate::metrics::{Outcome, SymbolizerMetrics};
use crate::object::SymFrame;
use crate::resolve::{Resolution, Resolver};
use crate::rewrite::Writer;
use crate::scan::{collect_pids, scan};
use crate::sources::debuginfod::Fetcher;
use profilink_proto::otlp::{ExportProfilesServiceRequest, ProfilesDictionary, ResourceProfiles};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The per-request counts of [`Symbolizer::symbolize`], by outcome.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Locations named.
    pub symbolized: u64,
    /// Native locations left as addresses, by outcome.
    pub unsymbolized: HashMap<&'static str, u64>,
    /// Locations that needed nothing (already named, not native).
    pub not_native: u64,
}

impl Summary {
    fn add(&mut self, outcome: Outcome, n: u64) {
        if n == 0 {
            return;
        }
        match outcome {
            Outcome::Symbolized => self.symbolized += n,
            Outcome::NotNative => self.not_native += n,
            o => *self.unsymbolized.entry(o.label()).or_default() += n,
        }
    }
}

/// Symbolizes native frames of OTLP profiles; cheap to clone (shared caches and counters).
///
/// Every method blocks (file reads, DWARF parsing, waiting for downloads up to the configured
/// `wait`): call it from a blocking thread (`tokio::task::spawn_blocking`), not from async code.
#[derive(Clone)]
pub struct Symbolizer {
    inner: Arc<Inner>,
}

struct Inner {
    wait: Duration,
    process_source: bool,
    resolver: Resolver,
    addresses: BoundedCache<(ObjectId, u64), Arc<[SymFrame]>>,
    metrics: Arc<SymbolizerMetrics>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer").finish_non_exhaustive()
    }
}

/// Cost of an address cache entry: the frames' strings and a fixed overhead.
fn frames_cost(frames: &[SymFrame]) -> usize {
    96 + frames
        .iter()
        .map(|f| 64 + f.function.len() + f.system_name.len() + f.file.len())
        .sum::<usize>()
}

impl Symbolizer {
    /// A symbolizer with `cfg` (checked with [`SymbolizerConfig::check`] by config readers).
    /// Nothing is read or fetched before the first request.
    pub fn new(cfg: SymbolizerConfig) -> Symbolizer {
        let metrics = Arc::new(SymbolizerMetrics::default());
        let fetcher = Fetcher::new(&cfg, Arc::clone(&metrics));
        let memory =
            usize::try_from(cfg.max_memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        // Three quarters for loaded objects, a quarter for looked-up addresses.
        let objects = memory / 4 * 3;
        Symbolizer {
            inner: Arc::new(Inner {
                wait: cfg.wait,
                process_source: cfg.sources.contains(&SourceKind::Process),
                addresses: BoundedCache::new(memory - objects),
                resolver: Resolver::new(cfg, fetcher, objects),
                metrics,
            }),
        }
    }

    /// The counters (shared by clones).
    pub fn metrics(&self) -> Arc<SymbolizerMetrics> {
        Arc::clone(&self.inner.metrics)
    }

    /// Symbolizes a request in place (see [`Symbolizer::symbolize`]).
    pub fn symbolize_request(&self, req: &mut ExportProfilesServiceRequest) -> Summary {
        match req.dictionary.as_mut() {
            Some(d) => self.symbolize(d, &req.resource_profiles),
            None => Summary::default(),
        }
    }

    /// Names the native locations of `dict` that have no lines: each gets its inline chain
    /// (marked with [`SYMBOLIZED_KEY`](crate::SYMBOLIZED_KEY)). `resources` are the profiles using the dictionary (their
    /// `process.pid` tells which processes' files to look in). Every location is counted in
    /// the metrics with its outcome.
    pub fn symbolize(
        &self,
        dict: &mut ProfilesDictionary,
        resources: &[ResourceProfiles],
    ) -> Summary {
        let inner = &*self.inner;
        let mut summary = Summary::default();
        let mut sc = scan(dict);
        summary.add(Outcome::NotNative, sc.not_native);
        summary.add(Outcome::NoDebugInfo, sc.no_identity);

        // Mappings with a location whose address is not cached yet need their object.
        let mut frames: Vec<Option<Arc<[SymFrame]>>> = Vec::with_capacity(sc.native.len());
        let mut need: HashMap<usize, Option<Resolution>> = HashMap::new();
        let mut hits = 0u64;
        for &(li, m) in &sc.native {
            let key = (sc.mappings[&m].id.clone(), dict.location_table[li].address);
            let cached = inner.addresses.get(&key);
            if cached.is_some() {
                hits += 1;
            } else {
                need.entry(m).or_insert(None);
            }
            frames.push(cached);
        }
        SymbolizerMetrics::inc(&inner.metrics.cache_hits, hits);
        if !need.is_empty() {
            if inner.process_source {
                collect_pids(dict, resources, &mut sc.mappings);
            }
            let resolve = |m: usize| {
                let mr = &sc.mappings[&m];
                let pids: Vec<u32> = mr.pids.iter().copied().collect();
                inner.resolver.resolve(&mr.id, &mr.filename, &pids)
            };
            for (m, r) in need.iter_mut() {
                *r = Some(resolve(*m));
            }
            let pending: Vec<Vec<u8>> = need
                .iter()
                .filter(|(_, r)| r.as_ref().is_some_and(|r| r.pending))
                .filter_map(|(m, _)| sc.mappings[m].id.gnu().map(<[u8]>::to_vec))
                .collect();
            if !pending.is_empty() && !inner.wait.is_zero() {
                inner
                    .resolver
                    .fetcher()
                    .wait(&pending, Instant::now() + inner.wait);
                for (m, r) in need.iter_mut() {
                    if r.as_ref().is_some_and(|r| r.pending) {
                        *r = Some(resolve(*m));
                    }
                }
            }
        }

        let mut writer = Writer::new(dict);
        let mut misses = 0u64;
        for (&(li, m), cached) in sc.native.iter().zip(frames) {
            let result = match cached {
                Some(f) => Ok(f),
                None => match need.get(&m).and_then(Option::as_ref) {
                    Some(Resolution {
                        object: Some(obj),
                        pending,
                        ..
                    }) => {
                        misses += 1;
                        let address = writer.address(li);
                        let f: Arc<[SymFrame]> = obj.lookup(address).into();
                        if !pending {
                            let key = (sc.mappings[&m].id.clone(), address);
                            inner.addresses.insert(key, Arc::clone(&f), frames_cost(&f));
                        }
                        Ok(f)
                    }
                    Some(r) => Err(r.failure),
                    None => Err(Outcome::NoDebugInfo),
                },
            };
            match result {
                Ok(f) if !f.is_empty() => {
                    writer.set(li, &f);
                    summary.add(Outcome::Symbolized, 1);
                }
                Ok(_) => summary.add(Outcome::NoDebugInfo, 1),
                Err(o) => summary.add(o, 1),
            }
        }
        SymbolizerMetrics::inc(&inner.metrics.cache_misses, misses);
        inner
            .metrics
            .add_frames(Outcome::Symbolized, summary.symbolized);
        inner
            .metrics
            .add_frames(Outcome::NotNative, summary.not_native);
        for o in Outcome::ALL {
            if let Some(n) = summary.unsymbolized.get(o.label()) {
                inner.metrics.add_frames(o, *n);
            }
        }
        summary
    }
}
