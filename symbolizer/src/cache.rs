//! A small least-recently-used map bounded by a cost (bytes), shared between threads.
//!
//! Used for loaded objects (cost: their DWARF and symbols) and for looked-up addresses, keyed
//! by (object id, address). Eviction drops the least recently used entries until the total
//! is at most 7/8 of the bound, so it runs rarely; finding them is a sort of the entries'
//! last-use ticks (O(n log n) every n/8 insertions at most).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

struct Entry<V> {
    value: V,
    cost: usize,
    tick: u64,
}

struct Inner<K, V> {
    map: HashMap<K, Entry<V>>,
    total: usize,
    tick: u64,
}

/// See the module docs.
pub(crate) struct BoundedCache<K, V> {
    inner: Mutex<Inner<K, V>>,
    max: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> BoundedCache<K, V> {
    /// A cache holding at most `max` cost.
    pub(crate) fn new(max: usize) -> Self {
        BoundedCache {
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                total: 0,
                tick: 0,
            }),
            max,
        }
    }

    /// The value under `key`, marked as used.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.tick += 1;
        let tick = g.tick;
        let e = g.map.get_mut(key)?;
        e.tick = tick;
        Some(e.value.clone())
    }

    /// Inserts (or replaces) `key`; an entry costing more than the whole bound is not kept.
    pub(crate) fn insert(&self, key: K, value: V, cost: usize) {
        if cost > self.max {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.tick += 1;
        let tick = g.tick;
        if let Some(old) = g.map.insert(key, Entry { value, cost, tick }) {
            g.total -= old.cost;
        }
        g.total += cost;
        if g.total > self.max {
            let target = self.max - self.max / 8;
            let mut ticks: Vec<(u64, K)> = g.map.iter().map(|(k, e)| (e.tick, k.clone())).collect();
            ticks.sort_unstable_by_key(|(t, _)| *t);
            for (_, k) in ticks {
                if g.total <= target {
                    break;
                }
                if let Some(e) = g.map.remove(&k) {
                    g.total -= e.cost;
                }
            }
        }
    }

    /// The total cost held.
    #[cfg(test)]
    pub(crate) fn total(&self) -> usize {
        self.inner.lock().unwrap().total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used() {
        let c = BoundedCache::new(100);
        for i in 0..10 {
            c.insert(i, i, 10);
        }
        assert_eq!(c.total(), 100);
        assert_eq!(c.get(&0), Some(0));
        c.insert(10, 10, 10);
        assert!(c.total() <= 100);
        assert_eq!(c.get(&0), Some(0), "recently used survives");
        assert_eq!(c.get(&1), None, "least recently used went first");
        c.insert(99, 99, 1000);
        assert_eq!(c.get(&99), None, "bigger than the bound: not kept");
    }
}
