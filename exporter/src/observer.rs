//! Where an exporter keeps the [`ChunkObserver`] (the contract's hook that sees every merged
//! chunk an exporter queues for delivery; the service's `profile_store` keeps them for the
//! flamegraph API): a config slot, [`ObserverSlot`].

use profilink_consumer::{ChunkObserver, SharedObserver};
use profilink_proto::sentry::ProfileChunk;
use std::sync::Arc;

/// A config field holding an optional [`ChunkObserver`] (not read from YAML; set by the program
/// that starts the exporter). Two slots are equal when they hold the same observer.
#[derive(Clone, Default)]
pub struct ObserverSlot(pub SharedObserver);

impl ObserverSlot {
    /// A slot holding `observer`.
    pub fn new(observer: Arc<dyn ChunkObserver>) -> Self {
        ObserverSlot(Some(observer))
    }

    /// Tells the observer, if any, that `chunk` was queued.
    pub fn queued(&self, project_id: Option<u64>, chunk: &ProfileChunk) {
        if let Some(o) = &self.0 {
            o.queued(project_id, chunk);
        }
    }
}

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ObserverSlot(Some)"
        } else {
            "ObserverSlot(None)"
        })
    }
}

impl PartialEq for ObserverSlot {
    fn eq(&self, other: &Self) -> bool {
        same_arc(&self.0, &other.0)
    }
}

/// Whether two optional shared values are the same one (both absent, or the same allocation):
/// how config slots holding trait objects compare.
pub(crate) fn same_arc<T: ?Sized>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Seen(Mutex<Vec<(Option<u64>, String)>>);

    impl ChunkObserver for Seen {
        fn queued(&self, project_id: Option<u64>, chunk: &ProfileChunk) {
            if let Ok(mut v) = self.0.lock() {
                v.push((project_id, chunk.chunk_id.clone()));
            }
        }
    }

    #[test]
    fn slots_compare_by_identity_and_forward() {
        let a = Arc::new(Seen::default());
        let slot = ObserverSlot::new(a.clone());
        assert_eq!(slot, slot.clone());
        assert_ne!(slot, ObserverSlot::new(Arc::new(Seen::default())));
        assert_ne!(slot, ObserverSlot::default());
        assert_eq!(ObserverSlot::default(), ObserverSlot::default());
        let chunk = ProfileChunk {
            chunk_id: "c".into(),
            ..Default::default()
        };
        slot.queued(Some(7), &chunk);
        ObserverSlot::default().queued(Some(8), &chunk);
        assert_eq!(*a.0.lock().unwrap(), vec![(Some(7), "c".to_string())]);
    }
}
