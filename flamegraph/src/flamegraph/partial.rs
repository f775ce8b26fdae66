//! A flamegraph under construction ([`Partial`]): the call trees of chunks merged by function
//! name and package into one tree with per-function accumulators and vroom's metrics; two
//! halves built on two threads merge, then [`Partial::finish`] gives the response.

use super::*;

/// FxHash (rustc's hasher): much faster than SipHash for the integer keys of the merge.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(buf));
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

/// Per-function accumulator; run durations are gathered once at the end.
#[derive(Default)]
struct InfoAcc {
    count: u64,
    weight: u64,
    sum_self: u64,
    n_durations: usize,
}

/// A node of the merged flamegraph tree (node 0 is a virtual root).
struct GNode {
    frame: u32,
    parent: u32,
    first_child: u32,
    last_child: u32,
    next_sibling: u32,
    sample_count: u64,
    duration_ns: u64,
    examples: Vec<u32>,
}

const NONE: u32 = u32::MAX;

/// vroom's metrics aggregator entry; durations are gathered from `sources` at the end.
struct MetricAcc {
    frame: u32,
    in_app: bool,
    sample_count: u64,
    sum_duration: u64,
    sum_self: u64,
    n_durations: usize,
    /// (selected chunk, thread, function) entries contributing.
    sources: Vec<(u32, u32, u32)>,
    max_self: u64,
    worst: u32,
    examples: Vec<u32>,
}

/// The aggregated threads of one selected chunk and the global ids of its frames.
struct ChunkUse {
    sel: u32,
    gids: Vec<u32>,
    threads: Vec<u32>,
}

/// A flamegraph under construction; two can be built in parallel and merged.
pub(super) struct Partial {
    with_metrics: bool,
    frames: Vec<OutFrame>,
    frame_ids: HashMap<String, u32>,
    infos: Vec<InfoAcc>,
    nodes: Vec<GNode>,
    child_of: FxMap<u64, u32>,
    metrics: FxMap<u32, MetricAcc>,
    examples: Vec<Example>,
    uses: Vec<ChunkUse>,
    chunks: usize,
    threads: usize,
    platforms: BTreeSet<String>,
    projects: BTreeSet<u64>,
    transaction_names: BTreeSet<String>,
    thread_names: BTreeSet<String>,
    thread_ids: BTreeSet<String>,
    first_start: Option<f64>,
    last_received: Option<f64>,
    key: String,
}

impl Partial {
    pub(super) fn new(with_metrics: bool) -> Partial {
        Partial {
            with_metrics,
            frames: Vec::new(),
            frame_ids: HashMap::new(),
            infos: Vec::new(),
            nodes: vec![GNode {
                frame: NONE,
                parent: NONE,
                first_child: NONE,
                last_child: NONE,
                next_sibling: NONE,
                sample_count: 0,
                duration_ns: 0,
                examples: Vec::new(),
            }],
            child_of: FxMap::default(),
            metrics: FxMap::default(),
            examples: Vec::new(),
            uses: Vec::new(),
            chunks: 0,
            threads: 0,
            platforms: BTreeSet::new(),
            projects: BTreeSet::new(),
            transaction_names: BTreeSet::new(),
            thread_names: BTreeSet::new(),
            thread_ids: BTreeSet::new(),
            first_start: None,
            last_received: None,
            key: String::new(),
        }
    }

    /// The global index of the function `name` in `package`, added (from `make`) on first use.
    fn intern(&mut self, name: &str, package: &str, make: impl FnOnce() -> OutFrame) -> u32 {
        self.key.clear();
        self.key.push_str(name);
        self.key.push('\0');
        self.key.push_str(package);
        if let Some(&id) = self.frame_ids.get(self.key.as_str()) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(make());
        self.infos.push(InfoAcc::default());
        self.frame_ids.insert(self.key.clone(), id);
        id
    }

    /// The child of `parent` for function `gid`, created (last among siblings) when missing.
    fn child(&mut self, parent: u32, gid: u32) -> u32 {
        let key = (u64::from(parent) << 32) | u64::from(gid);
        if let Some(&id) = self.child_of.get(&key) {
            return id;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(GNode {
            frame: gid,
            parent,
            first_child: NONE,
            last_child: NONE,
            next_sibling: NONE,
            sample_count: 0,
            duration_ns: 0,
            examples: Vec::new(),
        });
        let last = self.nodes[parent as usize].last_child;
        if last == NONE {
            self.nodes[parent as usize].first_child = id;
        } else {
            self.nodes[last as usize].next_sibling = id;
        }
        self.nodes[parent as usize].last_child = id;
        self.child_of.insert(key, id);
        id
    }

    fn add_metric(&mut self, fp: u32, frame: u32, m: MetricAcc) {
        match self.metrics.get_mut(&fp) {
            Some(acc) => {
                acc.sample_count += m.sample_count;
                acc.n_durations += m.n_durations;
                acc.sources.extend_from_slice(&m.sources);
                acc.sum_duration += m.sum_duration;
                acc.sum_self += m.sum_self;
                if m.max_self > acc.max_self {
                    acc.max_self = m.max_self;
                    acc.worst = m.worst;
                }
                for e in m.examples {
                    if acc.examples.len() < MAX_EXAMPLES {
                        acc.examples.push(e);
                    }
                }
            }
            None => {
                self.metrics.insert(fp, MetricAcc { frame, ..m });
            }
        }
    }

    /// Adds the threads of selected chunk `sel` (those containing `fingerprint`, when set).
    pub(super) fn add_chunk(
        &mut self,
        sel: usize,
        cand: &Candidate,
        agg: &ChunkAgg,
        fingerprint: Option<u32>,
    ) {
        let threads: Vec<u32> = (0..agg.threads.len() as u32)
            .filter(|&i| {
                fingerprint
                    .is_none_or(|fp| agg.thread_has_fingerprint(&agg.threads[i as usize], fp))
            })
            .collect();
        if threads.is_empty() {
            return;
        }
        self.chunks += 1;
        let info = &cand.info;
        self.platforms.insert(info.platform.clone());
        self.projects.insert(info.project_id);
        self.transaction_names
            .extend(info.transaction_names.iter().cloned());
        self.first_start = Some(self.first_start.map_or(info.start, |s| s.min(info.start)));
        self.last_received = Some(
            self.last_received
                .map_or(info.received, |r| r.max(info.received)),
        );
        // Chunk frame -> global function, interned when first referenced.
        let mut gids: Vec<u32> = vec![NONE; agg.frames.len()];
        let gid_of = |this: &mut Partial, gids: &mut [u32], local: u32| -> u32 {
            let slot = &mut gids[local as usize];
            if *slot == NONE {
                let f = &agg.frames[local as usize];
                *slot = this.intern(&f.name, &f.package, || OutFrame {
                    col: f.col,
                    file: f.file.clone(),
                    image: f.package.clone(),
                    is_application: f.is_application,
                    line: f.line,
                    name: f.name.clone(),
                    path: f.path.clone(),
                    fingerprint: f.fingerprint,
                });
            }
            *slot
        };
        let mut map: Vec<u32> = Vec::new();
        for &ti in &threads {
            let t = &agg.threads[ti as usize];
            self.threads += 1;
            if !t.name.is_empty() {
                self.thread_names.insert(t.name.clone());
            }
            self.thread_ids.insert(t.thread_id.clone());
            let example = self.examples.len() as u32;
            self.examples.push(Example {
                project_id: info.project_id,
                profiler_id: info.profiler_id.clone(),
                chunk_id: info.chunk_id.clone(),
                thread_id: t.thread_id.clone(),
                start: info.start,
                end: info.end,
            });
            map.clear();
            for n in &t.nodes {
                let parent = if n.parent == NO_PARENT {
                    0
                } else {
                    map[n.parent as usize]
                };
                let gid = gid_of(self, &mut gids, n.frame);
                let g = self.child(parent, gid);
                map.push(g);
                let gn = &mut self.nodes[g as usize];
                gn.sample_count += n.sample_count;
                gn.duration_ns += n.duration_ns;
                if n.ends_samples && gn.examples.last() != Some(&example) {
                    gn.examples.push(example);
                }
                let acc = &mut self.infos[gid as usize];
                acc.count += u64::from(n.occurrence);
                acc.weight += n.duration_ns;
                acc.sum_self += n.self_time_ns;
                acc.n_durations += n.durations_len as usize;
            }
            if self.with_metrics {
                for (fi, f) in t.functions.iter().enumerate() {
                    let gid = gid_of(self, &mut gids, f.frame);
                    let fp = self.frames[gid as usize].fingerprint;
                    self.add_metric(
                        fp,
                        gid,
                        MetricAcc {
                            frame: gid,
                            in_app: f.in_app,
                            sample_count: f.sample_count,
                            sum_duration: f.sum_duration_ns,
                            sum_self: f.sum_self_time_ns,
                            n_durations: f.durations.len(),
                            sources: vec![(sel as u32, ti, fi as u32)],
                            max_self: f.sum_self_time_ns,
                            worst: example,
                            examples: vec![example],
                        },
                    );
                }
            }
        }
        self.uses.push(ChunkUse {
            sel: sel as u32,
            gids,
            threads,
        });
    }

    /// Adds everything of `other` (built from later chunks) to `self`.
    pub(super) fn merge(&mut self, other: Partial) {
        let offset = self.examples.len() as u32;
        let gids: Vec<u32> = other
            .frames
            .iter()
            .map(|f| self.intern(&f.name, &f.image, || f.clone()))
            .collect();
        for (i, acc) in other.infos.into_iter().enumerate() {
            let mine = &mut self.infos[gids[i] as usize];
            mine.count += acc.count;
            mine.weight += acc.weight;
            mine.sum_self += acc.sum_self;
            mine.n_durations += acc.n_durations;
        }
        let mut map: Vec<u32> = vec![0; other.nodes.len()];
        for (j, n) in other.nodes.into_iter().enumerate().skip(1) {
            let g = self.child(map[n.parent as usize], gids[n.frame as usize]);
            map[j] = g;
            let gn = &mut self.nodes[g as usize];
            gn.sample_count += n.sample_count;
            gn.duration_ns += n.duration_ns;
            gn.examples.extend(n.examples.iter().map(|e| e + offset));
        }
        let mut metrics: Vec<(u32, MetricAcc)> = other.metrics.into_iter().collect();
        metrics.sort_by_key(|(fp, _)| *fp);
        for (fp, mut m) in metrics {
            m.worst += offset;
            for e in &mut m.examples {
                *e += offset;
            }
            let frame = gids[m.frame as usize];
            self.add_metric(fp, frame, m);
        }
        for mut u in other.uses {
            for g in &mut u.gids {
                if *g != NONE {
                    *g = gids[*g as usize];
                }
            }
            self.uses.push(u);
        }
        self.examples.extend(other.examples);
        self.chunks += other.chunks;
        self.threads += other.threads;
        self.platforms.extend(other.platforms);
        self.projects.extend(other.projects);
        self.transaction_names.extend(other.transaction_names);
        self.thread_names.extend(other.thread_names);
        self.thread_ids.extend(other.thread_ids);
        self.first_start = match (self.first_start, other.first_start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_received = match (self.last_received, other.last_received) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    pub(super) fn finish(self, selected: &[(Candidate, Arc<ChunkAgg>)]) -> Flamegraph {
        // Every run duration of every function, grouped by function in one buffer.
        let mut offsets = Vec::with_capacity(self.infos.len() + 1);
        let mut total = 0usize;
        for i in &self.infos {
            offsets.push(total);
            total += i.n_durations;
        }
        offsets.push(total);
        let mut flat = vec![0u64; total];
        let mut cursor = offsets.clone();
        for u in &self.uses {
            let agg = &selected[u.sel as usize].1;
            for &ti in &u.threads {
                let t = &agg.threads[ti as usize];
                for n in &t.nodes {
                    let g = u.gids[n.frame as usize] as usize;
                    let (ds, dl) = (n.durations_start as usize, n.durations_len as usize);
                    // Element loop: the slices are a few values long.
                    for (dst, &d) in flat[cursor[g]..cursor[g] + dl]
                        .iter_mut()
                        .zip(&t.durations[ds..ds + dl])
                    {
                        *dst = d;
                    }
                    cursor[g] += dl;
                }
            }
        }
        // Quantiles per function, the functions split in two halves of similar size.
        let n = self.infos.len();
        let split = offsets.partition_point(|&o| o < total / 2).min(n);
        let (lo, hi) = flat.split_at_mut(offsets[split]);
        let quantiles_of = |range: std::ops::Range<usize>, buf: &mut [u64], base: usize| {
            range
                .map(|g| quantiles(&mut buf[offsets[g] - base..offsets[g + 1] - base]))
                .collect::<Vec<_>>()
        };
        let (mut q, q_hi) = if total >= 100_000 {
            std::thread::scope(|s| {
                let h = s.spawn(|| quantiles_of(split..n, hi, offsets[split]));
                let q = quantiles_of(0..split, lo, 0);
                (q, h.join().unwrap_or_default())
            })
        } else {
            (
                quantiles_of(0..split, lo, 0),
                quantiles_of(split..n, hi, offsets[split]),
            )
        };
        q.extend(q_hi);
        let frame_infos = self
            .infos
            .iter()
            .zip(q)
            .map(|(i, [p75, p95, p99])| FrameInfo {
                count: i.count,
                weight: i.weight,
                sum_duration: i.weight,
                sum_self_time: i.sum_self,
                p75_duration: p75,
                p95_duration: p95,
                p99_duration: p99,
            })
            .collect();
        drop(flat);
        let mut fg = Flamegraph {
            frame_infos,
            frames: self.frames,
            examples: self.examples,
            chunks: self.chunks,
            threads: self.threads,
            platforms: self.platforms.into_iter().collect(),
            projects: self.projects.into_iter().collect(),
            transaction_names: self.transaction_names.into_iter().collect(),
            thread_names: self.thread_names.into_iter().collect(),
            thread_ids: self.thread_ids.into_iter().collect(),
            first_start: self.first_start,
            last_received: self.last_received,
            ..Default::default()
        };
        fg.samples = emit_samples(&self.nodes);
        if self.with_metrics {
            let mut accs: Vec<(u32, MetricAcc)> = self.metrics.into_iter().collect();
            // vroom's ToMetrics order: self time, then total duration (fingerprint for ties).
            accs.sort_by(|(fa, a), (fb, b)| {
                b.sum_self
                    .cmp(&a.sum_self)
                    .then(b.sum_duration.cmp(&a.sum_duration))
                    .then(fa.cmp(fb))
            });
            accs.truncate(crate::calltree::MAX_UNIQUE_FUNCTIONS);
            let mut buf: Vec<u64> = Vec::new();
            let list = accs
                .into_iter()
                .map(|(fp, m)| {
                    buf.clear();
                    for &(sel, ti, fi) in &m.sources {
                        let t = &selected[sel as usize].1.threads[ti as usize];
                        buf.extend_from_slice(&t.functions[fi as usize].durations);
                    }
                    let [p75, p95, p99] = quantiles(&mut buf);
                    let f = &fg.frames[m.frame as usize];
                    FunctionMetrics {
                        name: f.name.clone(),
                        package: f.image.clone(),
                        fingerprint: fp,
                        in_app: m.in_app,
                        p75,
                        p95,
                        p99,
                        avg: if m.n_durations == 0 {
                            0.0
                        } else {
                            m.sum_duration as f64 / m.n_durations as f64
                        },
                        sum: m.sum_duration,
                        count: m.sample_count,
                        worst: fg.examples[m.worst as usize].clone(),
                        examples: m
                            .examples
                            .iter()
                            .map(|&e| fg.examples[e as usize].clone())
                            .collect(),
                    }
                })
                .collect();
            fg.metrics = Some(list);
        }
        fg
    }
}

/// Depth-first walk emitting samples (vroom's `visitCalltree`): a leaf's samples, and after a
/// node's children the samples that end at the node itself.
fn emit_samples(nodes: &[GNode]) -> Vec<FlameSample> {
    let mut out = Vec::new();
    let mut path: Vec<u32> = Vec::new();
    // (node, exiting): a node is visited on entry and once more on exit.
    let mut stack: Vec<(u32, bool)> = Vec::new();
    let children = |id: u32| {
        let mut v = Vec::new();
        let mut c = nodes[id as usize].first_child;
        while c != NONE {
            v.push(c);
            c = nodes[c as usize].next_sibling;
        }
        v
    };
    for c in children(0).into_iter().rev() {
        stack.push((c, false));
    }
    while let Some((id, exiting)) = stack.pop() {
        let n = &nodes[id as usize];
        if exiting {
            let (mut child_count, mut child_dur) = (0u64, 0u64);
            for c in children(id) {
                child_count += nodes[c as usize].sample_count;
                child_dur += nodes[c as usize].duration_ns;
            }
            if n.sample_count > child_count {
                out.push(FlameSample {
                    stack: path.clone(),
                    count: n.sample_count - child_count,
                    duration_ns: n.duration_ns.saturating_sub(child_dur),
                    examples: n.examples.clone(),
                });
            }
            path.pop();
            continue;
        }
        path.push(n.frame);
        stack.push((id, true));
        for c in children(id).into_iter().rev() {
            stack.push((c, false));
        }
    }
    out
}
