//! Compact binary encoding of [`ChunkAgg`] (LEB128 varints and length-prefixed strings), as the
//! store keeps it next to each chunk.

use super::*;

struct Writer(Vec<u8>);

impl Writer {
    fn u64(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                return;
            }
            self.0.push(b | 0x80);
        }
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u64(&mut self) -> Option<u64> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let (&b, rest) = self.0.split_first()?;
            self.0 = rest;
            if shift >= 64 {
                return None;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
            shift += 7;
        }
    }
    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.u64()?).ok()
    }
    fn len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        // A length can never exceed the bytes left (every element takes at least one byte).
        (n <= self.0.len()).then_some(n)
    }
    fn str(&mut self) -> Option<String> {
        let n = self.len()?;
        let (s, rest) = self.0.split_at(n);
        self.0 = rest;
        String::from_utf8(s.to_vec()).ok()
    }
}

impl ChunkAgg {
    /// Encodes the aggregate (uncompressed).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.u64(self.frames.len() as u64);
        for f in &self.frames {
            w.str(&f.name);
            w.str(&f.package);
            w.str(&f.file);
            w.str(&f.path);
            w.u64(f.line.into());
            w.u64(f.col.into());
            w.u64(f.is_application.into());
            w.u64(f.fingerprint.into());
            w.u64(f.legacy_fingerprint.into());
        }
        w.u64(self.threads.len() as u64);
        for t in &self.threads {
            w.str(&t.thread_id);
            w.str(&t.name);
            w.u64(t.nodes.len() as u64);
            for n in &t.nodes {
                w.u64(n.frame.into());
                w.u64(u64::from(n.parent.wrapping_add(1)));
                w.u64(n.occurrence.into());
                w.u64(n.sample_count);
                w.u64(n.duration_ns);
                w.u64(n.self_time_ns);
                w.u64(n.durations_start.into());
                w.u64(n.durations_len.into());
                w.u64(n.ends_samples.into());
            }
            w.u64(t.durations.len() as u64);
            for &d in &t.durations {
                w.u64(d);
            }
            w.u64(t.functions.len() as u64);
            for f in &t.functions {
                w.u64(f.frame.into());
                w.u64(f.in_app.into());
                w.u64(f.sample_count);
                w.u64(f.sum_duration_ns);
                w.u64(f.sum_self_time_ns);
                w.u64(f.durations.len() as u64);
                for &d in &f.durations {
                    w.u64(d);
                }
            }
        }
        w.0
    }

    /// Decodes an aggregate written by [`ChunkAgg::encode`]; `None` if it is malformed.
    pub(crate) fn decode(bytes: &[u8]) -> Option<ChunkAgg> {
        let mut r = Reader(bytes);
        let nf = r.len()?;
        let mut frames = Vec::with_capacity(nf);
        for _ in 0..nf {
            frames.push(AggFrame {
                name: r.str()?,
                package: r.str()?,
                file: r.str()?,
                path: r.str()?,
                line: r.u32()?,
                col: r.u32()?,
                is_application: r.u64()? != 0,
                fingerprint: r.u32()?,
                legacy_fingerprint: r.u32()?,
            });
        }
        let nt = r.len()?;
        let mut threads = Vec::with_capacity(nt);
        for _ in 0..nt {
            let thread_id = r.str()?;
            let name = r.str()?;
            let nn = r.len()?;
            let mut nodes = Vec::with_capacity(nn);
            for i in 0..nn {
                let node = AggNode {
                    frame: r.u32()?,
                    parent: r.u32()?.wrapping_sub(1),
                    occurrence: r.u32()?,
                    sample_count: r.u64()?,
                    duration_ns: r.u64()?,
                    self_time_ns: r.u64()?,
                    durations_start: r.u32()?,
                    durations_len: r.u32()?,
                    ends_samples: r.u64()? != 0,
                };
                let parent_ok = node.parent == NO_PARENT || (node.parent as usize) < i;
                if node.frame as usize >= frames.len() || !parent_ok {
                    return None;
                }
                nodes.push(node);
            }
            let nd = r.len()?;
            let mut durations = Vec::with_capacity(nd);
            for _ in 0..nd {
                durations.push(r.u64()?);
            }
            for n in &nodes {
                let end = n.durations_start as usize + n.durations_len as usize;
                if end > durations.len() {
                    return None;
                }
            }
            let nfn = r.len()?;
            let mut functions = Vec::with_capacity(nfn);
            for _ in 0..nfn {
                let frame = r.u32()?;
                if frame as usize >= frames.len() {
                    return None;
                }
                let in_app = r.u64()? != 0;
                let sample_count = r.u64()?;
                let sum_duration_ns = r.u64()?;
                let sum_self_time_ns = r.u64()?;
                let nd = r.len()?;
                let mut durations = Vec::with_capacity(nd);
                for _ in 0..nd {
                    durations.push(r.u64()?);
                }
                functions.push(FunctionAgg {
                    frame,
                    in_app,
                    sample_count,
                    sum_duration_ns,
                    sum_self_time_ns,
                    durations,
                });
            }
            threads.push(ThreadAgg {
                thread_id,
                name,
                nodes,
                durations,
                functions,
            });
        }
        r.0.is_empty().then_some(ChunkAgg { frames, threads })
    }

    /// Approximate heap size in bytes (for the cache budget).
    pub(crate) fn approx_size(&self) -> usize {
        let frames: usize = self
            .frames
            .iter()
            .map(|f| 64 + f.name.len() + f.package.len() + f.file.len() + f.path.len())
            .sum();
        let threads: usize = self
            .threads
            .iter()
            .map(|t| {
                96 + t.nodes.len() * std::mem::size_of::<AggNode>()
                    + t.durations.len() * 8
                    + t.functions
                        .iter()
                        .map(|f| 64 + f.durations.len() * 8)
                        .sum::<usize>()
            })
            .sum();
        64 + frames + threads
    }

    /// Whether any node of `thread` is a frame with fingerprint `fp` (either variant).
    pub(crate) fn thread_has_fingerprint(&self, thread: &ThreadAgg, fp: u32) -> bool {
        thread.nodes.iter().any(|n| {
            let f = &self.frames[n.frame as usize];
            f.fingerprint == fp || f.legacy_fingerprint == fp
        })
    }
}
