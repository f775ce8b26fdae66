//! Requests shaped as async-profiler sends OTLP, built from the repository's eBPF fixture
//! (`tests/fixtures/otlp/ebpf-profile.pb`: its CPU stacks, function names and thread names).
//!
//! Provenance: async-profiler's `src/otlp.cpp` / `src/otlp.h` (github.com/async-profiler/
//! async-profiler) as of the commit before "Upgrade to opentelemetry-proto v1.10.0" (#1768,
//! 2026-07-13), i.e. proto 1.9, the shape the Amazon CloudWatch recommendation (`event=itimer`)
//! produces today:
//! * no resource, an empty scope, one profile;
//! * `sample_type` = (engine type, `count`), no `period_type`, no `period`;
//!   `time_unix_nano` / `duration_nano` of the recording; values only, no timestamps;
//! * the string table is an index filled from 0: `string_table[0]` is the engine type
//!   (`itimer`, `ctimer`…), then its unit (`ns`), `count`, function names, `thread.name`;
//! * one empty mapping; `function_table[i]` has only a name; `location_table[i]` is
//!   `{mapping_index: 0, lines: [{function_index: i}]}` for every function *including 0*
//!   (`location_table[0]` is a real location), while `stack_table[0]` is the empty stack;
//! * `attribute_table[i]` is `thread.name` = the i-th thread name, index 0 included; a
//!   sample carries `attribute_indices` only when its thread's index is not 0;
//! * `Sample`: `stack_index = 1`, `values = 2`, `attribute_indices = 3` (1.9 numbers; 1.10
//!   has `attribute_indices = 2, values = 4`), each written as one unpacked varint, as
//!   `ProtoBuffer::field` writes them.
//!
//! [`encode`] writes those bytes by hand, field by field in otlp.cpp's order, so the test
//! input does not depend on profilink's decoder or on prost's encoder.
#![allow(dead_code)]

use profilink_proto::otlp::{ExportProfilesServiceRequest, any_value};
use std::collections::BTreeMap;

/// One aggregated sample: (stack function names leaf first, thread name, count).
pub type Aggregated = (Vec<String>, String, u64);

/// The CPU samples of `req` aggregated as async-profiler aggregates call traces: per (stack
/// of function names, thread name), the number of samples; in first-seen order.
pub fn aggregate(req: &ExportProfilesServiceRequest) -> Vec<Aggregated> {
    let d = req.dictionary.as_ref().unwrap();
    let s = |i: i32| d.string_table[i as usize].clone();
    let mut order: Vec<(Vec<String>, String)> = Vec::new();
    let mut counts: BTreeMap<(Vec<String>, String), u64> = BTreeMap::new();
    for p in req
        .resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles)
    {
        let st = p.sample_type.unwrap_or_default();
        if s(st.type_strindex) != "samples" {
            continue;
        }
        for sample in &p.samples {
            let mut names = Vec::new();
            for &li in &d.stack_table[sample.stack_index as usize].location_indices {
                let loc = &d.location_table[li as usize];
                for line in &loc.lines {
                    let f = &d.function_table[line.function_index as usize];
                    names.push(s(f.name_strindex));
                }
                if loc.lines.is_empty() {
                    names.push(format!("0x{:x}", loc.address));
                }
            }
            let mut thread = String::new();
            for &ai in &sample.attribute_indices {
                let a = &d.attribute_table[ai as usize];
                if s(a.key_strindex) == "thread.name" {
                    thread = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(any_value::Value::StringValue(v)) => v.clone(),
                        Some(any_value::Value::StringValueStrindex(i)) => s(*i),
                        _ => String::new(),
                    };
                }
            }
            let n = sample.timestamps_unix_nano.len().max(1) as u64;
            let key = (names, thread);
            if !counts.contains_key(&key) {
                order.push(key.clone());
            }
            *counts.entry(key).or_default() += n;
        }
    }
    order
        .into_iter()
        .map(|k| {
            let n = counts[&k];
            (k.0, k.1, n)
        })
        .collect()
}

/// The sample-field numbers of a layout: (values, attribute_indices).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Layout {
    /// async-profiler before #1768: `values = 2, attribute_indices = 3`.
    V1_9,
    /// The same content with 1.10's numbers: `attribute_indices = 2, values = 4`.
    V1_10,
}

/// A first-seen index from 0, as async-profiler's `Index`.
#[derive(Default)]
struct Index(Vec<String>);

impl Index {
    fn of(&mut self, s: &str) -> u64 {
        match self.0.iter().position(|x| x == s) {
            Some(i) => i as u64,
            None => {
                self.0.push(s.to_owned());
                (self.0.len() - 1) as u64
            }
        }
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_varint(out: &mut Vec<u8>, field: u64, v: u64) {
    varint(out, field << 3);
    varint(out, v);
}

fn field_bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn field_fixed64(out: &mut Vec<u8>, field: u64, v: u64) {
    varint(out, (field << 3) | 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// The bytes async-profiler's `Otlp::Recorder::record(…, samples = true)` writes for
/// `samples` recorded by `engine` (`itimer`, `ctimer`…) with unit `unit` (`count` in samples
/// mode), from `start_ns` for `duration_ns`.
pub fn encode(
    samples: &[Aggregated],
    engine: &str,
    unit: &str,
    start_ns: u64,
    duration_ns: u64,
    layout: Layout,
) -> Vec<u8> {
    let mut strings = Index::default();
    let engine_type = strings.of(engine);
    let _engine_unit = strings.of("ns");
    let unit_index = strings.of(unit);
    let mut functions = Index::default();
    let mut threads = Index::default();
    // recordStacks: stack_table[0] is the empty stack, then one stack per call trace.
    let mut dictionary = Vec::new();
    field_bytes(&mut dictionary, 7, &[]);
    let mut infos = Vec::new();
    for (names, thread, count) in samples {
        let mut indices = Vec::new();
        for n in names {
            varint(&mut indices, functions.of(n));
        }
        let thread_index = if thread.is_empty() {
            0
        } else {
            threads.of(thread)
        };
        let mut stack = Vec::new();
        field_bytes(&mut stack, 1, &indices);
        field_bytes(&mut dictionary, 7, &stack);
        infos.push((*count, thread_index));
    }
    // mapping_table: one empty mapping.
    field_bytes(&mut dictionary, 1, &[]);
    // function_table: names only.
    let names: Vec<String> = functions.0.clone();
    for name in &names {
        let mut f = Vec::new();
        field_varint(&mut f, 1, strings.of(name));
        field_bytes(&mut dictionary, 3, &f);
    }
    // location_table: one per function, index 0 included.
    for i in 0..names.len() {
        let mut line = Vec::new();
        field_varint(&mut line, 1, i as u64);
        let mut loc = Vec::new();
        field_varint(&mut loc, 1, 0);
        field_bytes(&mut loc, 3, &line);
        field_bytes(&mut dictionary, 2, &loc);
    }
    // attribute_table: thread names, index 0 included.
    if !threads.0.is_empty() {
        let key = strings.of("thread.name");
        for t in threads.0.clone() {
            let mut value = Vec::new();
            field_bytes(&mut value, 1, t.as_bytes());
            let mut attr = Vec::new();
            field_varint(&mut attr, 1, key);
            field_bytes(&mut attr, 2, &value);
            field_bytes(&mut dictionary, 6, &attr);
        }
    }
    for s in &strings.0 {
        field_bytes(&mut dictionary, 5, s.as_bytes());
    }
    // The profile.
    let mut profile = Vec::new();
    field_fixed64(&mut profile, 3, start_ns);
    field_varint(&mut profile, 4, duration_ns);
    let mut sample_type = Vec::new();
    field_varint(&mut sample_type, 1, engine_type);
    field_varint(&mut sample_type, 2, unit_index);
    field_bytes(&mut profile, 1, &sample_type);
    let (values_field, attrs_field) = match layout {
        Layout::V1_9 => (2, 3),
        Layout::V1_10 => (4, 2),
    };
    for (i, (count, thread_index)) in infos.iter().enumerate() {
        let mut sample = Vec::new();
        field_varint(&mut sample, 1, i as u64 + 1);
        if *thread_index != 0 {
            field_varint(&mut sample, attrs_field, *thread_index);
        }
        field_varint(&mut sample, values_field, *count);
        field_bytes(&mut profile, 2, &sample);
    }
    let mut scope = Vec::new();
    field_bytes(&mut scope, 2, &profile);
    let mut resource = Vec::new();
    field_bytes(&mut resource, 2, &scope);
    let mut out = Vec::new();
    field_bytes(&mut out, 2, &dictionary);
    field_bytes(&mut out, 1, &resource);
    out
}

/// The stack counts of `samples`: (function names leaf first) -> count.
pub fn stack_counts(samples: &[Aggregated]) -> BTreeMap<Vec<String>, u64> {
    let mut m = BTreeMap::new();
    for (names, _, n) in samples {
        *m.entry(names.clone()).or_default() += n;
    }
    m
}
