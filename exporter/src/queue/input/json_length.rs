//! The exact length of a chunk's JSON, computed without serializing it: the size estimate the
//! accumulator and the queue's capacity use, stored in every record so a replay merges as the
//! first run did.

use profilink_proto::sentry::{
    ClientSdk, DebugImage, DebugMeta, Frame, Measurement, MeasurementValue, ProfileChunk,
    ProfileData, Sample, ThreadMetadata, json_f64_len,
};
use std::io;

/// Counts bytes written.
struct Counter(usize);

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn serde_len<T: serde::Serialize + ?Sized>(v: &T) -> usize {
    let mut c = Counter(0);
    // Writing to a counter cannot fail, and plain data with string keys always serializes.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Length of `s` as a JSON string, quotes included (serde_json's escaping).
pub fn json_str_len(s: &str) -> usize {
    let mut n = s.len() + 2;
    for &b in s.as_bytes() {
        match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0A | 0x0C | 0x0D => n += 1,
            0x00..=0x1F => n += 5,
            _ => {}
        }
    }
    n
}

pub(super) fn digits(v: u64) -> usize {
    // Mostly small numbers (stack frame indices): compare before dividing.
    match v {
        0..10 => 1,
        10..100 => 2,
        100..1000 => 3,
        1000..10000 => 4,
        _ => v.ilog10() as usize + 1,
    }
}

/// Length of `[a,b,…]` with `count` elements of `elements` bytes in all.
fn array_len(count: usize, elements: usize) -> usize {
    2 + elements + count.saturating_sub(1)
}

/// Builds the length of one JSON object: `{` entries separated by commas `}`.
#[derive(Default)]
struct Obj {
    count: usize,
    len: usize,
}

impl Obj {
    /// An entry whose key needs no escaping (a field name).
    fn field(&mut self, key: &str, value_len: usize) -> &mut Self {
        self.count += 1;
        self.len += key.len() + 3 + value_len;
        self
    }
    /// An entry whose key is data.
    fn entry(&mut self, key: &str, value_len: usize) -> &mut Self {
        self.count += 1;
        self.len += json_str_len(key) + 1 + value_len;
        self
    }
    fn opt_str(&mut self, key: &str, v: Option<&str>) -> &mut Self {
        if let Some(v) = v {
            self.field(key, json_str_len(v));
        }
        self
    }
    fn total(&self) -> usize {
        array_len(self.count, self.len)
    }
}

fn debug_meta_len(dm: &DebugMeta) -> usize {
    let DebugMeta { images } = dm;
    let mut images_len = 0;
    for im in images {
        let DebugImage {
            image_type,
            code_file,
            debug_id,
            code_id,
            image_addr,
            image_vmaddr,
            image_size,
            other,
        } = im;
        let mut o = Obj::default();
        o.field("type", json_str_len(image_type))
            .opt_str("code_file", code_file.as_deref())
            .opt_str("debug_id", debug_id.as_deref())
            .opt_str("code_id", code_id.as_deref())
            .opt_str("image_addr", image_addr.as_deref())
            .opt_str("image_vmaddr", image_vmaddr.as_deref());
        if let Some(v) = image_size {
            o.field("image_size", digits(*v));
        }
        // `other` is flattened into the image object, after the known fields.
        for (k, v) in other {
            o.entry(k, serde_len(v));
        }
        images_len += o.total();
    }
    let mut o = Obj::default();
    o.field("images", array_len(images.len(), images_len));
    o.total()
}

/// The exact length of `chunk.to_json()`, computed without building it, with `frame_len(i)`
/// the JSON length of frame `i` (so a batch counts each distinct frame once). Every struct is
/// destructured exhaustively: a field added to the chunk types does not compile until it is
/// counted here (and the tests compare with serde_json for chunks that set every field).
pub(super) fn json_len_with(chunk: &ProfileChunk, frame_len: impl Fn(usize) -> usize) -> usize {
    let ProfileChunk {
        chunk_id,
        profiler_id,
        debug_meta,
        environment,
        platform,
        release,
        content_type,
        client_sdk,
        measurements,
        version,
        profile,
    } = chunk;
    let ProfileData {
        samples,
        stacks,
        frames,
        thread_metadata,
    } = profile;
    let mut thread_lens: Vec<(&str, usize)> = Vec::new();
    let mut s_len = 0usize;
    for s in samples {
        // {"timestamp":T,"stack_id":N,"thread_id":"X"}
        let Sample {
            timestamp,
            stack_id,
            thread_id,
        } = s;
        let tid = thread_id.as_str();
        let tl = match thread_lens.iter().find(|(t, _)| *t == tid) {
            Some((_, l)) => *l,
            None => {
                let l = json_str_len(tid);
                if thread_lens.len() < 64 {
                    thread_lens.push((tid, l));
                }
                l
            }
        };
        s_len += 13 + json_f64_len(*timestamp) + 12 + digits(*stack_id as u64) + 13 + tl + 1;
    }
    let mut st_len = 0usize;
    for st in stacks {
        st_len += array_len(
            st.len(),
            st.iter().map(|&i| digits(i as u64)).sum::<usize>(),
        );
    }
    let f_len: usize = (0..frames.len()).map(&frame_len).sum();
    let mut p = Obj::default();
    p.field("samples", array_len(samples.len(), s_len))
        .field("stacks", array_len(stacks.len(), st_len))
        .field("frames", array_len(frames.len(), f_len));
    if !thread_metadata.is_empty() {
        let mut tm = Obj::default();
        for (tid, meta) in thread_metadata {
            let ThreadMetadata { name, priority } = meta;
            let mut m = Obj::default();
            m.opt_str("name", name.as_deref());
            if let Some(v) = priority {
                m.field("priority", digits(u64::from(*v)));
            }
            tm.entry(tid, m.total());
        }
        p.field("thread_metadata", tm.total());
    }

    let mut c = Obj::default();
    c.field("chunk_id", json_str_len(chunk_id))
        .field("profiler_id", json_str_len(profiler_id));
    if let Some(dm) = debug_meta {
        c.field("debug_meta", debug_meta_len(dm));
    }
    c.opt_str("environment", environment.as_deref())
        .field("platform", json_str_len(platform))
        .opt_str("release", release.as_deref())
        .opt_str("content_type", content_type.as_deref());
    if let Some(sdk) = client_sdk {
        let ClientSdk { name, version } = sdk;
        let mut o = Obj::default();
        o.field("name", json_str_len(name))
            .field("version", json_str_len(version));
        c.field("client_sdk", o.total());
    }
    if !measurements.is_empty() {
        let mut ms = Obj::default();
        for (name, m) in measurements {
            let Measurement { unit, values } = m;
            let mut v_len = 0;
            for v in values {
                let MeasurementValue { timestamp, value } = v;
                // {"timestamp":T,"value":V}
                v_len += 13 + json_f64_len(*timestamp) + 9 + json_f64_len(*value) + 1;
            }
            let mut o = Obj::default();
            o.field("unit", json_str_len(unit))
                .field("values", array_len(values.len(), v_len));
            ms.entry(name, o.total());
        }
        c.field("measurements", ms.total());
    }
    c.field("version", json_str_len(version))
        .field("profile", p.total());
    c.total()
}

/// The exact length of `chunk.to_json()`.
#[cfg(test)]
pub fn json_len(chunk: &ProfileChunk) -> usize {
    let lens: Vec<usize> = chunk
        .profile
        .frames
        .iter()
        .map(|f| frame_json_len(f))
        .collect();
    json_len_with(chunk, |i| lens[i])
}

/// The exact length of a frame's JSON: every field that is set, in declaration order, as
/// `"name":value`. (The destructuring is exhaustive, so a new `Frame` field does not compile
/// until it is counted here.)
pub fn frame_json_len(f: &Frame) -> usize {
    let Frame {
        abs_path,
        colno,
        filename,
        function,
        in_app,
        instruction_addr,
        lineno,
        module,
        package,
        platform,
    } = f;
    let mut o = Obj::default();
    o.opt_str("abs_path", abs_path.as_deref());
    if let Some(v) = colno {
        o.field("colno", digits(u64::from(*v)));
    }
    o.opt_str("filename", filename.as_deref())
        .opt_str("function", function.as_deref());
    if let Some(b) = in_app {
        o.field("in_app", if *b { 4 } else { 5 });
    }
    o.opt_str("instruction_addr", instruction_addr.as_deref());
    if let Some(v) = lineno {
        o.field("lineno", digits(u64::from(*v)));
    }
    o.opt_str("module", module.as_deref())
        .opt_str("package", package.as_deref())
        .opt_str("platform", platform.as_deref());
    o.total()
}
