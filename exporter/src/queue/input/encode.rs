//! The encoder: one `export` batch into one record (or a few, see [`MAX_BATCH_RECORD`]),
//! sharing frames and strings across the batch's chunks.

use super::json_length::{frame_json_len, json_len_with};
use super::*;
use crate::merge::frame_hash;
use hashbrown::HashTable;
use profilink_proto::sentry::{CompactString, Frame, ProfileChunk};
use std::collections::HashMap;
use std::sync::Arc;

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

/// Encodes a batch of `(route, chunk)` without linked threads; see `encode_batch_linked`.
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

/// The bytes an input record counts for in the queue's capacity: its own size, what it takes
/// on disk. (Until issue #44 it counted as the JSON size of its chunks, `json_bytes`: about 10
/// times its size and 3.7 times what its samples take once merged on the load test's requests,
/// so a queue holding inputs for the settle rule's seconds filled long before its disk did.)
pub fn charge(body: &[u8]) -> u64 {
    body.len() as u64
}
