//! From a mapping's identity to a loaded object: the configured sources in order, and the
//! in-memory object cache (bounded by the memory the objects hold).
//!
//! The first source that gives DWARF ends the search; an object with symbols only is kept
//! while later sources are asked (a stripped executable in the process, its debug file on a
//! debuginfod server). While a download runs, the object found so far is used and not kept
//! as final, so the request after the download gets the DWARF. A build id no source had is
//! not looked for again for `retry_after`.

use crate::cache::BoundedCache;
use crate::config::{SourceKind, SymbolizerConfig};
use crate::file_id::ObjectId;
use crate::metrics::Outcome;
use crate::object::{LoadedObject, has_dwarf};
use crate::sources::debuginfod::{FetchStatus, Fetcher};
use crate::sources::{debug_dirs, process};
use std::sync::Arc;
use std::time::Instant;

/// A cached resolution.
#[derive(Clone)]
enum Cached {
    /// Found, and no source can do better.
    Final(Arc<LoadedObject>),
    /// Nothing found; asked again after the instant.
    Missing(Outcome, Instant),
}

/// A resolution for one request.
#[derive(Debug, Clone)]
pub(crate) struct Resolution {
    /// The object, when one was found.
    pub object: Option<Arc<LoadedObject>>,
    /// Without an object: why (the outcome its frames get).
    pub failure: Outcome,
    /// A debuginfod download for it is running.
    pub pending: bool,
}

/// See the module docs.
pub(crate) struct Resolver {
    cfg: SymbolizerConfig,
    objects: BoundedCache<ObjectId, Cached>,
    fetcher: Fetcher,
}

impl Resolver {
    pub(crate) fn new(cfg: SymbolizerConfig, fetcher: Fetcher, max_bytes: usize) -> Resolver {
        Resolver {
            cfg,
            objects: BoundedCache::new(max_bytes),
            fetcher,
        }
    }

    pub(crate) fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// Resolves the object `id`, named `filename`, mapped by the processes `pids`.
    pub(crate) fn resolve(&self, id: &ObjectId, filename: &str, pids: &[u32]) -> Resolution {
        match self.objects.get(id) {
            Some(Cached::Final(o)) => {
                return Resolution {
                    object: Some(o),
                    failure: Outcome::Symbolized,
                    pending: false,
                };
            }
            Some(Cached::Missing(outcome, until)) if Instant::now() < until => {
                return Resolution {
                    object: None,
                    failure: outcome,
                    pending: false,
                };
            }
            _ => {}
        }
        let max = self.cfg.max_file_size();
        let mut files: Vec<Vec<u8>> = Vec::new();
        let mut dwarf = false;
        let mut pending = false;
        let mut failure = Outcome::NoDebugInfo;
        for source in &self.cfg.sources {
            if dwarf {
                break;
            }
            match source {
                SourceKind::DebugDirs => {
                    if let Some(d) = debug_dirs::find(&self.cfg.debug_dirs, id, max) {
                        dwarf |= has_dwarf(&d);
                        files.push(d);
                    }
                }
                SourceKind::Process => {
                    match process::find(
                        &self.cfg.proc_root,
                        pids,
                        filename,
                        id,
                        &self.cfg.debug_dirs,
                        max,
                    ) {
                        process::ProcessFind::Found(found) => {
                            dwarf |= found.iter().any(|d| has_dwarf(d));
                            files.extend(found);
                        }
                        process::ProcessFind::Mismatch => {
                            if failure == Outcome::NoDebugInfo {
                                failure = Outcome::BuildIdMismatch;
                            }
                        }
                        process::ProcessFind::NotFound => {}
                    }
                }
                SourceKind::Debuginfod => {
                    let Some(build_id) = id.gnu() else { continue };
                    if !self.fetcher.enabled() {
                        continue;
                    }
                    match self.fetcher.status(build_id) {
                        FetchStatus::Cached(d) => {
                            dwarf |= has_dwarf(&d);
                            files.push(d);
                        }
                        FetchStatus::Pending => pending = true,
                        FetchStatus::Failed => {
                            if failure == Outcome::NoDebugInfo {
                                failure = Outcome::FetchFailed;
                            }
                        }
                    }
                }
            }
        }
        // DWARF first: it is where `LoadedObject` takes line tables from.
        files.sort_by_key(|d| !has_dwarf(d));
        let refs: Vec<&[u8]> = files.iter().map(Vec::as_slice).collect();
        let object = LoadedObject::load(&refs)
            .ok()
            .filter(|o| !o.is_empty())
            .map(Arc::new);
        match &object {
            Some(o) if !pending => {
                self.objects
                    .insert(id.clone(), Cached::Final(Arc::clone(o)), o.cost() + 64);
            }
            Some(_) => {}
            None if pending => failure = Outcome::Timeout,
            None => {
                if !files.is_empty() {
                    failure = Outcome::NoDebugInfo;
                }
                self.objects.insert(
                    id.clone(),
                    Cached::Missing(failure, Instant::now() + self.cfg.retry_after),
                    64,
                );
            }
        }
        Resolution {
            object,
            failure,
            pending,
        }
    }
}
