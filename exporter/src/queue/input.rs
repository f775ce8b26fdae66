//! The input log's record format: a compact binary encoding of one `export` batch.
//!
//! Every `export` call appends one record (or a few, see [`MAX_BATCH_RECORD`]) holding all of
//! its chunks, instead of one JSON document per chunk: chunks of one request share their
//! frames, so the record keeps every distinct frame (and its strings) once, and samples are
//! fixed-size numbers rather than text.
//!
//! Layout (all integers LEB128 varints unless noted, strings are `varint length | UTF-8`):
//!
//! ```text
//! FF FF FF FF                 marker: an impossible route length of the legacy format
//! 02                          version
//! json_bytes (u64 LE)         the chunks' JSON size in all (see [`charge`])
//! strings:  n | n × string                         shared frame strings
//! frames:   n | n × (mask | present fields)         shared frames; string fields are indices
//! chunks:   n | n × chunk
//! chunk:    route | approx_json_bytes | chunk_id | profiler_id | environment? | platform |
//!           release? | content_type? | client_sdk? (name, version) | version | debug_meta? |
//!           measurements | frames (indices into the shared frames) | stacks |
//!           threads (distinct thread ids) | samples (f64 bits, 8 bytes LE | stack_id | thread) |
//!           thread_metadata | linked threads (n | n × string)
//! ```
//!
//! The linked threads (version 2) are the chunk's thread ids that spans may reference
//! ([`crate::ExportChunk::linked_threads`]): the accumulator never groups them, and a replay
//! must know them to merge as the first run did. Version 1 records (written before them) are
//! read with no linked threads.
//!
//! `x?` is a tag byte (0 absent, 1 present) followed by the value. A debug image's fields
//! other than the known ones (`DebugImage::other`) are kept as a JSON object, as before.
//! Floats are stored as their exact bits. Decoding checks every length, index and UTF-8
//! string, so a corrupt record is reported, never a panic.
//!
//! `approx_json_bytes` is the exact length of the chunk's JSON ([`json_len`]), which the
//! accumulator uses as its size estimate: replaying a record merges exactly as the first run
//! did.
//!
//! **Legacy records.** Queues written before this format hold one record per chunk:
//! `route length (u32 LE) | route | chunk JSON`. They are still read ([`decode`]), so an
//! upgrade with a non-empty queue delivers everything.

use crate::merge::frame_hash;
use hashbrown::HashTable;
use profilink_proto::sentry::{
    ClientSdk, CompactString, DebugImage, DebugMeta, Frame, Measurement, MeasurementValue,
    ProfileChunk, ProfileData, Sample, ThreadMetadata,
};
use std::collections::HashMap;
use std::io;
use std::sync::Arc;

/// The first four bytes of a record in this format.
pub const MARKER: [u8; 4] = [0xFF; 4];
/// The format version written.
pub const VERSION: u8 = 2;
/// The previous version (no linked threads), still read.
pub const VERSION_1: u8 = 1;
/// Records are closed (and a new one started) once they pass this size, far below the
/// segment log's record limit.
pub const MAX_BATCH_RECORD: usize = 32 << 20;

/// One chunk of a decoded record, with what the accumulator needs besides the chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedInput {
    /// Routing key.
    pub route: String,
    /// The chunk.
    pub chunk: ProfileChunk,
    /// Exact length of the chunk's JSON (the size estimate).
    pub approx_bytes: u64,
    /// [`frame_hash`] of each of the chunk's frames.
    pub frame_hashes: Vec<u64>,
    /// Thread ids spans may reference (never grouped).
    pub linked_threads: Vec<CompactString>,
}

/// An encoded record and the chunks (indices into the batch) it holds.
#[derive(Debug)]
pub struct EncodedRecord {
    /// The record body.
    pub body: Vec<u8>,
    /// Indices of the batch's chunks in this record.
    pub chunks: std::ops::Range<usize>,
}

/// What encoding found out about a chunk, for the accumulator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChunkInfo {
    /// Exact length of the chunk's JSON (the size estimate).
    pub approx_bytes: u64,
    /// [`frame_hash`] of each of the chunk's frames (computed once per distinct frame).
    pub frame_hashes: Vec<u64>,
}

// ---- JSON length ----

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

fn json_f64_len(v: f64) -> usize {
    use serde_json::ser::Formatter;
    if !v.is_finite() {
        return 4; // null
    }
    let mut c = Counter(0);
    let _ = serde_json::ser::CompactFormatter.write_f64(&mut c, v);
    c.0
}

fn digits(v: u64) -> usize {
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
fn json_len_with(chunk: &ProfileChunk, frame_len: impl Fn(usize) -> usize) -> usize {
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

// ---- encoding ----

fn put_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_var(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            out.push(1);
            put_str(out, s);
        }
        None => out.push(0),
    }
}

fn put_f64(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_bits().to_le_bytes());
}

const F_ABS_PATH: u64 = 1;
const F_COLNO: u64 = 1 << 1;
const F_FILENAME: u64 = 1 << 2;
const F_FUNCTION: u64 = 1 << 3;
const F_IN_APP: u64 = 1 << 4;
const F_IN_APP_TRUE: u64 = 1 << 5;
const F_INSTRUCTION_ADDR: u64 = 1 << 6;
const F_LINENO: u64 = 1 << 7;
const F_MODULE: u64 = 1 << 8;
const F_PACKAGE: u64 = 1 << 9;
const F_PLATFORM: u64 = 1 << 10;
const F_ALL: u64 = (1 << 11) - 1;

type Fast = hashbrown::DefaultHashBuilder;

/// Builds one record.
struct RecordWriter {
    strings: Vec<u8>,
    n_strings: u64,
    string_ids: HashMap<Arc<str>, u64, Fast>,
    frames: Vec<u8>,
    /// Distinct frames of the record (by content), their JSON lengths and content hashes.
    frame_list: Vec<Arc<Frame>>,
    frame_json: Vec<usize>,
    frame_hashes: Vec<u64>,
    frame_table: HashTable<u64>,
    /// Address of a shared frame -> record frame index. The translator shares each frame
    /// between the chunks of a request, so most frames are found here with one lookup. (Every
    /// frame is alive while a batch is encoded, so no address is reused.)
    frame_ptrs: HashMap<usize, u64, Fast>,
    chunks: Vec<u8>,
    n_chunks: u64,
    json_bytes: u64,
}

impl RecordWriter {
    fn new() -> Self {
        RecordWriter {
            strings: Vec::new(),
            n_strings: 0,
            string_ids: HashMap::default(),
            frames: Vec::new(),
            frame_list: Vec::new(),
            frame_json: Vec::new(),
            frame_hashes: Vec::new(),
            frame_table: HashTable::new(),
            frame_ptrs: HashMap::default(),
            chunks: Vec::new(),
            n_chunks: 0,
            json_bytes: 0,
        }
    }

    fn size(&self) -> usize {
        self.strings.len() + self.frames.len() + self.chunks.len()
    }

    fn string(&mut self, s: &Arc<str>) -> u64 {
        if let Some(&id) = self.string_ids.get(&**s) {
            return id;
        }
        let id = self.n_strings;
        self.n_strings += 1;
        put_str(&mut self.strings, s);
        self.string_ids.insert(s.clone(), id);
        id
    }

    /// The record's index of frame `f`: by the shared frame's address, else by content, else
    /// added.
    fn frame(&mut self, f: &Arc<Frame>) -> u64 {
        let ptr = Arc::as_ptr(f) as usize;
        if let Some(&id) = self.frame_ptrs.get(&ptr) {
            return id;
        }
        let id = self.frame_by_content(f);
        self.frame_ptrs.insert(ptr, id);
        id
    }

    /// [`RecordWriter::frame`] for a frame not seen at this address.
    fn frame_by_content(&mut self, f: &Arc<Frame>) -> u64 {
        let hash = frame_hash(f);
        let list = &self.frame_list;
        if let Some(&id) = self.frame_table.find(hash, |&i| *list[i as usize] == **f) {
            return id;
        }
        let mut mask = 0u64;
        let mut fields: Vec<u64> = Vec::with_capacity(7);
        for (bit, v) in [
            (F_ABS_PATH, &f.abs_path),
            (F_FILENAME, &f.filename),
            (F_FUNCTION, &f.function),
            (F_INSTRUCTION_ADDR, &f.instruction_addr),
            (F_MODULE, &f.module),
            (F_PACKAGE, &f.package),
            (F_PLATFORM, &f.platform),
        ] {
            if let Some(v) = v {
                mask |= bit;
                fields.push(self.string(v));
            }
        }
        if f.colno.is_some() {
            mask |= F_COLNO;
        }
        if f.lineno.is_some() {
            mask |= F_LINENO;
        }
        match f.in_app {
            Some(true) => mask |= F_IN_APP | F_IN_APP_TRUE,
            Some(false) => mask |= F_IN_APP,
            None => {}
        }
        put_var(&mut self.frames, mask);
        for v in fields {
            put_var(&mut self.frames, v);
        }
        if let Some(c) = f.colno {
            put_var(&mut self.frames, u64::from(c));
        }
        if let Some(l) = f.lineno {
            put_var(&mut self.frames, u64::from(l));
        }
        let id = self.frame_list.len() as u64;
        self.frame_list.push(Arc::clone(f));
        self.frame_json.push(frame_json_len(f));
        self.frame_hashes.push(hash);
        let hashes = &self.frame_hashes;
        self.frame_table
            .insert_unique(hash, id, |&i| hashes[i as usize]);
        id
    }

    fn chunk(&mut self, route: &str, chunk: &ProfileChunk, linked: &[CompactString]) -> ChunkInfo {
        let frame_ids: Vec<u64> = chunk.profile.frames.iter().map(|f| self.frame(f)).collect();
        let frame_hashes = frame_ids
            .iter()
            .map(|&i| self.frame_hashes[i as usize])
            .collect();
        let approx = json_len_with(chunk, |i| self.frame_json[frame_ids[i] as usize]) as u64;
        self.json_bytes += approx;
        let out = &mut self.chunks;
        self.n_chunks += 1;
        put_str(out, route);
        put_var(out, approx);
        put_str(out, &chunk.chunk_id);
        put_str(out, &chunk.profiler_id);
        put_opt_str(out, chunk.environment.as_deref());
        put_str(out, &chunk.platform);
        put_opt_str(out, chunk.release.as_deref());
        put_opt_str(out, chunk.content_type.as_deref());
        match &chunk.client_sdk {
            Some(sdk) => {
                out.push(1);
                put_str(out, &sdk.name);
                put_str(out, &sdk.version);
            }
            None => out.push(0),
        }
        put_str(out, &chunk.version);
        match &chunk.debug_meta {
            Some(dm) => {
                out.push(1);
                put_var(out, dm.images.len() as u64);
                for im in &dm.images {
                    put_str(out, &im.image_type);
                    put_opt_str(out, im.code_file.as_deref());
                    put_opt_str(out, im.debug_id.as_deref());
                    put_opt_str(out, im.code_id.as_deref());
                    put_opt_str(out, im.image_addr.as_deref());
                    put_opt_str(out, im.image_vmaddr.as_deref());
                    match im.image_size {
                        Some(v) => {
                            out.push(1);
                            put_var(out, v);
                        }
                        None => out.push(0),
                    }
                    if im.other.is_empty() {
                        put_var(out, 0);
                    } else {
                        let json = serde_json::to_vec(&im.other).unwrap_or_default();
                        put_var(out, json.len() as u64);
                        out.extend_from_slice(&json);
                    }
                }
            }
            None => out.push(0),
        }
        put_var(out, chunk.measurements.len() as u64);
        for (name, m) in &chunk.measurements {
            put_str(out, name);
            put_str(out, &m.unit);
            put_var(out, m.values.len() as u64);
            for v in &m.values {
                put_f64(out, v.timestamp);
                put_f64(out, v.value);
            }
        }
        let p = &chunk.profile;
        put_var(out, frame_ids.len() as u64);
        for id in frame_ids {
            put_var(out, id);
        }
        put_var(out, p.stacks.len() as u64);
        for st in &p.stacks {
            put_var(out, st.len() as u64);
            for &i in st {
                put_var(out, i as u64);
            }
        }
        // Distinct thread ids, then samples referring to them.
        let mut threads: Vec<&str> = Vec::new();
        let mut thread_map: HashMap<&str, u64, Fast> = HashMap::default();
        let mut sample_threads: Vec<u64> = Vec::with_capacity(p.samples.len());
        let mut last: Option<(&str, u64)> = None;
        for s in &p.samples {
            let t = s.thread_id.as_str();
            let idx = match last {
                Some((lt, li)) if lt == t => li,
                _ => *thread_map.entry(t).or_insert_with(|| {
                    threads.push(t);
                    threads.len() as u64 - 1
                }),
            };
            last = Some((t, idx));
            sample_threads.push(idx);
        }
        put_var(out, threads.len() as u64);
        for t in &threads {
            put_str(out, t);
        }
        put_var(out, p.samples.len() as u64);
        out.reserve(p.samples.len() * 12);
        for (s, t) in p.samples.iter().zip(sample_threads) {
            put_f64(out, s.timestamp);
            put_var(out, s.stack_id as u64);
            put_var(out, t);
        }
        put_var(out, p.thread_metadata.len() as u64);
        for (tid, meta) in &p.thread_metadata {
            put_str(out, tid);
            put_opt_str(out, meta.name.as_deref());
            match meta.priority {
                Some(v) => {
                    out.push(1);
                    put_var(out, u64::from(v));
                }
                None => out.push(0),
            }
        }
        put_var(out, linked.len() as u64);
        for t in linked {
            put_str(out, t);
        }
        ChunkInfo {
            approx_bytes: approx,
            frame_hashes,
        }
    }

    fn finish(self) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.size() + 40);
        body.extend_from_slice(&MARKER);
        body.push(VERSION);
        body.extend_from_slice(&self.json_bytes.to_le_bytes());
        put_var(&mut body, self.n_strings);
        body.extend_from_slice(&self.strings);
        put_var(&mut body, self.frame_list.len() as u64);
        body.extend_from_slice(&self.frames);
        put_var(&mut body, self.n_chunks);
        body.extend_from_slice(&self.chunks);
        body
    }
}

/// Encodes a batch of `(route, chunk)` without linked threads; see [`encode_batch_linked`].
pub fn encode_batch(items: &[(String, ProfileChunk)]) -> (Vec<EncodedRecord>, Vec<ChunkInfo>) {
    encode_batch_linked(items, &[])
}

/// Encodes a batch of `(route, chunk)`, with `linked[i]` the linked threads of chunk `i` (none
/// past the end of `linked`), into one record, or several when it passes
/// [`MAX_BATCH_RECORD`]; also returns each chunk's [`ChunkInfo`].
pub fn encode_batch_linked(
    items: &[(String, ProfileChunk)],
    linked: &[Vec<CompactString>],
) -> (Vec<EncodedRecord>, Vec<ChunkInfo>) {
    let mut records = Vec::new();
    let mut infos = Vec::with_capacity(items.len());
    let mut w = RecordWriter::new();
    let mut start = 0;
    for (i, (route, chunk)) in items.iter().enumerate() {
        if w.n_chunks > 0 && w.size() >= MAX_BATCH_RECORD {
            let done = std::mem::replace(&mut w, RecordWriter::new());
            records.push(EncodedRecord {
                body: done.finish(),
                chunks: start..i,
            });
            start = i;
        }
        let l = linked.get(i).map_or(&[][..], Vec::as_slice);
        infos.push(w.chunk(route, chunk, l));
    }
    if w.n_chunks > 0 {
        records.push(EncodedRecord {
            body: w.finish(),
            chunks: start..items.len(),
        });
    }
    (records, infos)
}

/// The bytes an input record counts for in the queue's capacity: the JSON size of its chunks
/// (about what they take in the ready log once merged, and what a record took before this
/// format) or its own size, whichever is larger. So `max_size_mib` bounds the queue as it did
/// when inputs were stored as JSON, although they take a fraction of that on disk.
pub fn charge(body: &[u8]) -> u64 {
    let own = body.len() as u64;
    if body.get(..4) == Some(&MARKER[..])
        && matches!(body.get(4), Some(&VERSION) | Some(&VERSION_1))
    {
        let json = body
            .get(5..13)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_le_bytes);
        return own.max(json);
    }
    own
}

// ---- decoding ----

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The record ends early or a length runs past its end.
    #[error("input record truncated")]
    Truncated,
    /// A varint is longer than 10 bytes or overflows, or bytes are left over.
    #[error("input record has a bad number")]
    BadNumber,
    /// A string is not UTF-8.
    #[error("input record has a string that is not UTF-8")]
    BadUtf8,
    /// A string or frame index is out of range.
    #[error("input record refers to a missing string or frame")]
    BadIndex,
    /// Unknown version or tag.
    #[error("input record has an unknown version or tag {0}")]
    BadTag(u8),
    /// A legacy record's JSON (or a debug image's extra fields) does not parse.
    #[error("input record JSON: {0}")]
    Json(String),
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    fn var(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::BadNumber);
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::BadNumber)
    }

    fn usize(&mut self) -> Result<usize, DecodeError> {
        usize::try_from(self.var()?).map_err(|_| DecodeError::BadNumber)
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.var()?).map_err(|_| DecodeError::BadNumber)
    }

    /// A count of elements each at least `min_size` bytes long (bounded by what is left, so a
    /// corrupt count cannot make us allocate much).
    fn count(&mut self, min_size: usize) -> Result<usize, DecodeError> {
        let n = self.usize()?;
        if n.saturating_mul(min_size.max(1)) > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        Ok(n)
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let b = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(b)
    }

    fn str(&mut self) -> Result<&'a str, DecodeError> {
        let n = self.usize()?;
        std::str::from_utf8(self.bytes(n)?).map_err(|_| DecodeError::BadUtf8)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        self.str().map(str::to_owned)
    }

    fn tag(&mut self) -> Result<bool, DecodeError> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            t => Err(DecodeError::BadTag(t)),
        }
    }

    fn opt_string(&mut self) -> Result<Option<String>, DecodeError> {
        Ok(if self.tag()? {
            Some(self.string()?)
        } else {
            None
        })
    }

    fn f64(&mut self) -> Result<f64, DecodeError> {
        let b: [u8; 8] = self
            .bytes(8)?
            .try_into()
            .map_err(|_| DecodeError::Truncated)?;
        Ok(f64::from_bits(u64::from_le_bytes(b)))
    }
}

fn decode_frame(r: &mut Reader<'_>, strings: &[Arc<str>]) -> Result<Frame, DecodeError> {
    let mask = r.var()?;
    if mask & !F_ALL != 0 {
        return Err(DecodeError::BadNumber);
    }
    let mut s = |bit: u64| -> Result<Option<Arc<str>>, DecodeError> {
        if mask & bit == 0 {
            return Ok(None);
        }
        let i = r.usize()?;
        strings
            .get(i)
            .cloned()
            .map(Some)
            .ok_or(DecodeError::BadIndex)
    };
    let abs_path = s(F_ABS_PATH)?;
    let filename = s(F_FILENAME)?;
    let function = s(F_FUNCTION)?;
    let instruction_addr = s(F_INSTRUCTION_ADDR)?;
    let module = s(F_MODULE)?;
    let package = s(F_PACKAGE)?;
    let platform = s(F_PLATFORM)?;
    let colno = if mask & F_COLNO != 0 {
        Some(r.u32()?)
    } else {
        None
    };
    let lineno = if mask & F_LINENO != 0 {
        Some(r.u32()?)
    } else {
        None
    };
    let in_app = (mask & F_IN_APP != 0).then_some(mask & F_IN_APP_TRUE != 0);
    Ok(Frame {
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
    })
}

fn decode_chunk(
    r: &mut Reader<'_>,
    frames: &[Arc<Frame>],
    hashes: &[u64],
    version: u8,
) -> Result<DecodedInput, DecodeError> {
    let route = r.string()?;
    let approx_bytes = r.var()?;
    // Struct literal fields are evaluated in the order written: the encoding's order.
    let mut c = ProfileChunk {
        chunk_id: r.string()?,
        profiler_id: r.string()?,
        environment: r.opt_string()?,
        platform: r.string()?,
        release: r.opt_string()?,
        content_type: r.opt_string()?,
        ..Default::default()
    };
    if r.tag()? {
        c.client_sdk = Some(ClientSdk {
            name: r.string()?,
            version: r.string()?,
        });
    }
    c.version = r.string()?;
    if r.tag()? {
        let n = r.count(8)?;
        let mut images = Vec::with_capacity(n);
        for _ in 0..n {
            let mut im = DebugImage {
                image_type: r.string()?,
                code_file: r.opt_string()?,
                debug_id: r.opt_string()?,
                code_id: r.opt_string()?,
                image_addr: r.opt_string()?,
                image_vmaddr: r.opt_string()?,
                image_size: if r.tag()? { Some(r.var()?) } else { None },
                ..Default::default()
            };
            let len = r.usize()?;
            if len > 0 {
                im.other = serde_json::from_slice(r.bytes(len)?)
                    .map_err(|e| DecodeError::Json(e.to_string()))?;
            }
            images.push(im);
        }
        c.debug_meta = Some(DebugMeta { images });
    }
    let n = r.count(3)?;
    for _ in 0..n {
        let name = r.string()?;
        let unit = r.string()?;
        let k = r.count(16)?;
        let mut values = Vec::with_capacity(k);
        for _ in 0..k {
            values.push(MeasurementValue {
                timestamp: r.f64()?,
                value: r.f64()?,
            });
        }
        c.measurements.insert(name, Measurement { unit, values });
    }
    let p = &mut c.profile;
    let n = r.count(1)?;
    p.frames.reserve(n);
    let mut frame_hashes = Vec::with_capacity(n);
    for _ in 0..n {
        let i = r.usize()?;
        let (Some(f), Some(h)) = (frames.get(i), hashes.get(i)) else {
            return Err(DecodeError::BadIndex);
        };
        p.frames.push(Arc::clone(f));
        frame_hashes.push(*h);
    }
    let n = r.count(1)?;
    p.stacks.reserve(n);
    for _ in 0..n {
        let k = r.count(1)?;
        let mut st = Vec::with_capacity(k);
        for _ in 0..k {
            st.push(r.usize()?);
        }
        p.stacks.push(st);
    }
    let n = r.count(1)?;
    let mut threads = Vec::with_capacity(n);
    for _ in 0..n {
        threads.push(CompactString::from(r.str()?));
    }
    let n = r.count(10)?;
    p.samples.reserve(n);
    for _ in 0..n {
        let timestamp = r.f64()?;
        let stack_id = r.usize()?;
        let t = r.usize()?;
        p.samples.push(Sample {
            timestamp,
            stack_id,
            thread_id: threads.get(t).cloned().ok_or(DecodeError::BadIndex)?,
        });
    }
    let n = r.count(3)?;
    for _ in 0..n {
        let tid = r.string()?;
        let name = r.opt_string()?;
        let priority = if r.tag()? { Some(r.u32()?) } else { None };
        p.thread_metadata
            .insert(tid, ThreadMetadata { name, priority });
    }
    let mut linked_threads = Vec::new();
    if version >= VERSION {
        let n = r.count(1)?;
        linked_threads.reserve(n);
        for _ in 0..n {
            linked_threads.push(CompactString::from(r.str()?));
        }
    }
    Ok(DecodedInput {
        route,
        chunk: c,
        approx_bytes,
        frame_hashes,
        linked_threads,
    })
}

/// Decodes an input record: this format, or a legacy single-chunk JSON record.
pub fn decode(body: &[u8]) -> Result<Vec<DecodedInput>, DecodeError> {
    if body.get(..4) != Some(&MARKER[..]) {
        return decode_legacy(body).map(|d| vec![d]);
    }
    let mut r = Reader { buf: body, pos: 4 };
    let version = r.byte()?;
    if version != VERSION && version != VERSION_1 {
        return Err(DecodeError::BadTag(version));
    }
    r.bytes(8)?;
    let n = r.count(1)?;
    let mut strings: Vec<Arc<str>> = Vec::with_capacity(n);
    for _ in 0..n {
        strings.push(Arc::from(r.str()?));
    }
    let n = r.count(1)?;
    let mut frames = Vec::with_capacity(n);
    for _ in 0..n {
        frames.push(Arc::new(decode_frame(&mut r, &strings)?));
    }
    let hashes: Vec<u64> = frames.iter().map(|f| frame_hash(f)).collect();
    let n = r.count(12)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(decode_chunk(&mut r, &frames, &hashes, version)?);
    }
    if r.remaining() != 0 {
        return Err(DecodeError::BadNumber);
    }
    Ok(out)
}

/// `route length (u32 LE) | route | chunk JSON` (queues written before the binary format).
fn decode_legacy(body: &[u8]) -> Result<DecodedInput, DecodeError> {
    let len_bytes: [u8; 4] = body
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or(DecodeError::Truncated)?;
    let len = u32::from_le_bytes(len_bytes) as usize;
    let route = body
        .get(4..4usize.saturating_add(len))
        .ok_or(DecodeError::Truncated)?;
    let json = &body[4 + len..];
    let chunk = ProfileChunk::from_json(json).map_err(|e| DecodeError::Json(e.to_string()))?;
    Ok(DecodedInput {
        route: String::from_utf8_lossy(route).into_owned(),
        linked_threads: Vec::new(),
        frame_hashes: chunk.profile.frames.iter().map(|f| frame_hash(f)).collect(),
        chunk,
        approx_bytes: json.len() as u64,
    })
}

/// A legacy record, as versions before the binary format wrote them (tests of the upgrade
/// path).
pub fn encode_legacy(route: &str, chunk: &ProfileChunk) -> Vec<u8> {
    let json = chunk.to_json();
    let mut out = Vec::with_capacity(4 + route.len() + json.len());
    out.extend_from_slice(&(route.len() as u32).to_le_bytes());
    out.extend_from_slice(route.as_bytes());
    out.extend_from_slice(&json);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn frame(function: &str, file: Option<&str>, line: Option<u32>) -> Frame {
        Frame {
            function: Some(function.into()),
            filename: file.map(Into::into),
            lineno: line,
            in_app: Some(line.is_some()),
            ..Default::default()
        }
    }

    /// A chunk that sets every field, with strings that need escaping.
    fn rich(seed: u32) -> ProfileChunk {
        let shared: Arc<str> = Arc::from("lib/\"shared\".rs");
        let mut other = BTreeMap::new();
        other.insert("arch".to_string(), serde_json::json!("x86_64"));
        other.insert("n".to_string(), serde_json::json!([1, 2.5, {"k": null}]));
        let mut c = ProfileChunk {
            chunk_id: format!("{seed:032x}"),
            profiler_id: "p\u{1}\u{1f}\\\n\t".into(),
            environment: Some("prod".into()),
            platform: "python".into(),
            release: Some("app@1.0 \u{e9}".into()),
            content_type: Some("text/x".into()),
            client_sdk: Some(ClientSdk {
                name: "sdk".into(),
                version: "1".into(),
            }),
            version: "2".into(),
            debug_meta: Some(DebugMeta {
                images: vec![
                    DebugImage {
                        image_type: "symbolic".into(),
                        code_file: Some("/lib/libc.so".into()),
                        debug_id: Some("abc".into()),
                        code_id: Some("c0de".into()),
                        image_addr: Some("0x1000".into()),
                        image_vmaddr: Some("0x0".into()),
                        image_size: Some(u64::MAX),
                        other,
                    },
                    DebugImage::default(),
                ],
            }),
            ..Default::default()
        };
        c.measurements.insert(
            "cpu \"usage\"".into(),
            Measurement {
                unit: "percent".into(),
                values: vec![
                    MeasurementValue {
                        timestamp: 1.5,
                        value: f64::MAX,
                    },
                    MeasurementValue {
                        timestamp: 2.0,
                        value: -0.0,
                    },
                ],
            },
        );
        c.measurements
            .insert("empty".into(), Measurement::default());
        let p = &mut c.profile;
        p.frames = vec![
            frame("main", Some("main.rs"), Some(seed)).into(),
            std::sync::Arc::new(Frame {
                abs_path: Some(shared.clone()),
                filename: Some(shared),
                colno: Some(7),
                instruction_addr: Some("0xff".into()),
                module: Some("m".into()),
                package: Some("pkg".into()),
                platform: Some("native".into()),
                in_app: Some(false),
                ..Default::default()
            }),
            std::sync::Arc::new(Frame::default()),
        ];
        p.stacks = vec![vec![0, 1, 2], vec![], vec![1, 99, 123_456]];
        for i in 0..40u32 {
            p.samples.push(Sample {
                timestamp: 1_761_887_343.253_558_9 + f64::from(i) * 0.01 + f64::from(seed),
                stack_id: (i % 4) as usize,
                thread_id: if i % 3 == 0 { "1\"2" } else { "237382" }.into(),
            });
        }
        p.samples.push(Sample {
            timestamp: f64::NAN,
            stack_id: usize::MAX,
            thread_id: "".into(),
        });
        p.thread_metadata.insert(
            "237382".into(),
            ThreadMetadata {
                name: Some("main".into()),
                priority: Some(3),
            },
        );
        p.thread_metadata
            .insert("x\n".into(), ThreadMetadata::default());
        c
    }

    fn minimal() -> ProfileChunk {
        ProfileChunk::default()
    }

    #[test]
    fn json_len_matches_serde() {
        for c in [rich(1), rich(77), minimal()] {
            assert_eq!(json_len(&c), c.to_json().len());
        }
        let mut c = rich(3);
        c.profile.samples.truncate(1);
        c.profile.stacks.truncate(1);
        c.profile.frames.truncate(1);
        c.measurements.clear();
        c.debug_meta = Some(DebugMeta::default());
        assert_eq!(json_len(&c), c.to_json().len());
        for s in [
            "",
            "a",
            "\"",
            "\\",
            "\u{0}",
            "\u{7f}",
            "\u{2028}",
            "\r\n\u{8}\u{c}",
        ] {
            assert_eq!(
                json_str_len(s),
                serde_json::to_vec(s).unwrap().len(),
                "{s:?}"
            );
        }
        for v in [
            0.0,
            -0.0,
            1e300,
            1.5e-300,
            123.456,
            f64::INFINITY,
            f64::NAN,
            1e21,
            1e-7,
        ] {
            let mut c = minimal();
            c.profile.samples.push(Sample {
                timestamp: v,
                stack_id: 12345,
                thread_id: "9".into(),
            });
            assert_eq!(json_len(&c), c.to_json().len(), "{v}");
        }
        for v in [0, 9, 10, 99, 100, 999, 1000, 9999, 10_000, u64::MAX] {
            assert_eq!(digits(v), v.to_string().len());
        }
        let full = Frame {
            abs_path: Some("/a/\"b\".py".into()),
            colno: Some(0),
            filename: Some("b.py".into()),
            function: Some("f\u{1}".into()),
            in_app: Some(true),
            instruction_addr: Some("0x10".into()),
            lineno: Some(u32::MAX),
            module: Some("m".into()),
            package: Some("p".into()),
            platform: Some("python".into()),
        };
        for f in rich(1)
            .profile
            .frames
            .iter()
            .map(|f| &**f)
            .chain([&full, &Frame::default()])
        {
            assert_eq!(
                frame_json_len(f),
                serde_json::to_vec(f).unwrap().len(),
                "{f:?}"
            );
        }
    }

    fn same(a: &ProfileChunk, b: &ProfileChunk) {
        // NaN != NaN: compare the JSON and the timestamps' bits.
        assert_eq!(a.to_json(), b.to_json());
        let bits = |c: &ProfileChunk| -> Vec<u64> {
            c.profile
                .samples
                .iter()
                .map(|s| s.timestamp.to_bits())
                .collect()
        };
        assert_eq!(bits(a), bits(b));
    }

    #[test]
    fn batch_round_trips_and_shares_frames() {
        let base = rich(5);
        // Chunks of one request share frames (same strings), as the translator makes them.
        let mut items: Vec<(String, ProfileChunk)> = (0..20)
            .map(|i| {
                let mut c = base.clone();
                c.chunk_id = format!("{i:032x}");
                (if i % 2 == 0 { "" } else { "route-b" }.to_string(), c)
            })
            .collect();
        items.push(("".into(), minimal()));
        let (records, infos) = encode_batch(&items);
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].chunks, 0..21);
        for ((_, c), i) in items.iter().zip(&infos) {
            assert_eq!(i.approx_bytes as usize, c.to_json().len());
            let hashes: Vec<u64> = c.profile.frames.iter().map(|f| frame_hash(f)).collect();
            assert_eq!(i.frame_hashes, hashes);
        }
        assert_eq!(
            charge(&records[0].body),
            infos.iter().map(|i| i.approx_bytes).sum::<u64>()
        );
        let decoded = decode(&records[0].body).unwrap();
        assert_eq!(decoded.len(), 21);
        for ((route, c), d) in items.iter().zip(&decoded) {
            assert_eq!(&d.route, route);
            same(c, &d.chunk);
            assert_eq!(d.approx_bytes as usize, c.to_json().len());
            let hashes: Vec<u64> = c.profile.frames.iter().map(|f| frame_hash(f)).collect();
            assert_eq!(d.frame_hashes, hashes);
        }
        // Shared frames are stored once: far smaller than 20 JSON chunks.
        let json: usize = items.iter().map(|(_, c)| c.to_json().len()).sum();
        assert!(
            records[0].body.len() * 3 < json,
            "{} vs {json}",
            records[0].body.len()
        );
    }

    #[test]
    fn equal_frames_with_different_strings_are_stored_once() {
        // Many frames, one sample: the record is mostly its frames and strings.
        let mut a = rich(1);
        a.profile.samples.truncate(1);
        a.profile.frames = (0..200)
            .map(|i| {
                frame(
                    &format!("module::function_{i}"),
                    Some("src/lib.rs"),
                    Some(i),
                )
                .into()
            })
            .collect();
        // The same content in freshly allocated strings (as from another translation).
        let b: ProfileChunk = ProfileChunk::from_json(&a.to_json()).unwrap();
        let (records, infos) = encode_batch(&[("".to_string(), a.clone()), ("".to_string(), b)]);
        let (single, _) = encode_batch(&[("".to_string(), a)]);
        assert_eq!(infos[0].frame_hashes, infos[1].frame_hashes);
        let d = decode(&records[0].body).unwrap();
        assert_eq!(d[0].chunk.profile.frames, d[1].chunk.profile.frames);
        // The second chunk adds only its frame indices, not its frames and strings again.
        let (one, two) = (single[0].body.len(), records[0].body.len());
        assert!(two * 10 < one * 13, "{two} vs {one}");
    }

    #[test]
    fn big_batches_are_split_into_records() {
        let mut c = rich(1);
        let s = c.profile.samples[0].clone();
        c.profile.samples = vec![s; (MAX_BATCH_RECORD / 10) + 1000];
        let items = vec![("".to_string(), c.clone()), ("".to_string(), c)];
        let (records, infos) = encode_batch(&items);
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].chunks, 0..1);
        assert_eq!(records[1].chunks, 1..2);
        assert_eq!(infos.len(), 2);
        assert_eq!(decode(&records[1].body).unwrap().len(), 1);
    }

    #[test]
    fn legacy_records_are_read() {
        let mut c = rich(2);
        // JSON has no NaN (it writes null, which does not read back as a timestamp).
        c.profile.samples.retain(|s| s.timestamp.is_finite());
        let body = encode_legacy("r", &c);
        let d = decode(&body).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].route, "r");
        assert_eq!(d[0].approx_bytes as usize, c.to_json().len());
        assert_eq!(d[0].chunk.profile.frames, c.profile.frames);
        assert_eq!(charge(&body), body.len() as u64);
    }

    #[test]
    fn linked_threads_round_trip() {
        let items = vec![("".to_string(), rich(4)), ("r".to_string(), rich(5))];
        let linked = vec![vec![
            CompactString::from("237382"),
            CompactString::from("1"),
        ]];
        let (records, _) = encode_batch_linked(&items, &linked);
        let d = decode(&records[0].body).unwrap();
        assert_eq!(d[0].linked_threads, linked[0]);
        assert!(d[1].linked_threads.is_empty());
        same(&items[0].1, &d[0].chunk);
    }

    #[test]
    fn version_1_records_are_read_without_linked_threads() {
        // A record as version 1 wrote it (before linked threads), byte by byte: one chunk of
        // two samples on thread 7, one frame `main`.
        let mut b: Vec<u8> = vec![0xff, 0xff, 0xff, 0xff, 1];
        b.extend_from_slice(&100u64.to_le_bytes()); // json_bytes
        b.extend_from_slice(&[1, 4, b'm', b'a', b'i', b'n']); // strings
        b.extend_from_slice(&[1, 0x08, 0]); // frames: function = string 0
        b.push(1); // chunks
        b.extend_from_slice(&[0, 100]); // route "", approx_json_bytes
        b.push(32);
        b.extend_from_slice(&[b'c'; 32]); // chunk_id
        b.push(32);
        b.extend_from_slice(&[b'p'; 32]); // profiler_id
        b.push(0); // environment
        b.extend_from_slice(&[4, b'r', b'u', b's', b't']); // platform
        b.extend_from_slice(&[0, 0, 0]); // release, content_type, client_sdk
        b.extend_from_slice(&[1, b'2']); // version
        b.extend_from_slice(&[0, 0]); // debug_meta, measurements
        b.extend_from_slice(&[1, 0]); // frames: record frame 0
        b.extend_from_slice(&[1, 1, 0]); // stacks: [[0]]
        b.extend_from_slice(&[1, 1, b'7']); // threads: "7"
        b.push(2); // samples
        for t in [1.0f64, 2.0] {
            b.extend_from_slice(&t.to_bits().to_le_bytes());
            b.extend_from_slice(&[0, 0]);
        }
        b.extend_from_slice(&[1, 1, b'7', 1, 4, b'm', b'a', b'i', b'n', 0]); // thread_metadata
        let d = decode(&b).unwrap();
        assert_eq!(d.len(), 1);
        let c = &d[0].chunk;
        assert!(d[0].linked_threads.is_empty());
        assert_eq!(c.chunk_id, "c".repeat(32));
        assert_eq!(c.profile.samples.len(), 2);
        assert_eq!(c.profile.samples[1].timestamp, 2.0);
        assert_eq!(c.profile.frames[0].function.as_deref(), Some("main"));
        assert_eq!(c.profile.thread_metadata["7"].name.as_deref(), Some("main"));
        assert_eq!(charge(&b), 100.max(b.len() as u64));
    }

    #[test]
    fn corrupt_records_are_errors_not_panics() {
        let (records, _) = encode_batch(&[("r".to_string(), rich(9))]);
        let body = &records[0].body;
        // Every truncation is an error; byte flips decode to an error or to something, but
        // never panic.
        for cut in 0..body.len() {
            assert!(decode(&body[..cut]).is_err(), "cut at {cut}");
        }
        for i in 4..body.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut b = body.clone();
                b[i] ^= x;
                let _ = decode(&b);
            }
        }
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff, 9]),
            Err(DecodeError::BadTag(9))
        );
        assert!(matches!(
            decode(&[
                0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff,
                0xff, 0xff, 0xff, 0xff, 0x7f
            ]),
            Err(DecodeError::BadNumber | DecodeError::Truncated)
        ));
    }
}
