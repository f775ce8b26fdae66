//! Shared helpers for the `otlp_to_sentry*` integration tests: a small request builder, the
//! chunk checks, and an independent brute-force computation of the expected observations.
#![allow(dead_code)]

use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, Function, KeyValue, KeyValueAndUnit, Line, Link,
    Location, Mapping, Profile, ProfilesDictionary, Resource, ResourceProfiles, Sample,
    ScopeProfiles, Stack, ValueType, any_value,
};
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::sentry::image_space;
use profilink_proto::sentry::secs_to_nanos;
use profilink_proto::sentry::{is_sentry_id, parse_instruction_addr};
use profilink_translator::otlp_to_sentry::{ChunkOptions, ChunkTranslation};
use profilink_translator::{AttrValue, Dictionary};
use std::collections::{BTreeSet, HashMap};

/// Builds a dictionary with deduplicated strings and zero entries in every table.
pub struct B {
    pub d: ProfilesDictionary,
    strings: HashMap<String, i32>,
}

impl Default for B {
    fn default() -> Self {
        Self::new()
    }
}

pub fn str_value(s: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(s.to_owned())),
    }
}

pub fn int_value(i: i64) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::IntValue(i)),
    }
}

impl B {
    pub fn new() -> Self {
        let mut strings = HashMap::new();
        strings.insert(String::new(), 0);
        B {
            d: ProfilesDictionary {
                mapping_table: vec![Mapping::default()],
                location_table: vec![Location::default()],
                function_table: vec![Function::default()],
                link_table: vec![Link::default()],
                string_table: vec![String::new()],
                attribute_table: vec![KeyValueAndUnit::default()],
                stack_table: vec![Stack::default()],
            },
            strings,
        }
    }

    pub fn s(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.d.string_table.len() as i32;
        self.d.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    pub fn attr(&mut self, key: &str, value: AnyValue) -> i32 {
        let key_strindex = self.s(key);
        let kvu = KeyValueAndUnit {
            key_strindex,
            value: Some(value),
            unit_strindex: 0,
        };
        if let Some(i) = self.d.attribute_table.iter().position(|a| *a == kvu) {
            return i as i32;
        }
        self.d.attribute_table.push(kvu);
        (self.d.attribute_table.len() - 1) as i32
    }

    pub fn attr_str(&mut self, key: &str, v: &str) -> i32 {
        self.attr(key, str_value(v))
    }

    pub fn attr_int(&mut self, key: &str, v: i64) -> i32 {
        self.attr(key, int_value(v))
    }

    /// A reference-based string attribute (`string_value_strindex`).
    pub fn attr_strref(&mut self, key: &str, v: &str) -> i32 {
        let vi = self.s(v);
        self.attr(
            key,
            AnyValue {
                value: Some(any_value::Value::StringValueStrindex(vi)),
            },
        )
    }

    pub fn func(&mut self, name: &str, file: &str) -> i32 {
        let f = Function {
            name_strindex: self.s(name),
            system_name_strindex: 0,
            filename_strindex: self.s(file),
            start_line: 0,
        };
        if let Some(i) = self.d.function_table.iter().position(|x| *x == f) {
            return i as i32;
        }
        self.d.function_table.push(f);
        (self.d.function_table.len() - 1) as i32
    }

    pub fn mapping(&mut self, file: &str, start: u64, limit: u64, build_id: Option<&str>) -> i32 {
        let attribute_indices = build_id
            .map(|b| vec![self.attr_str("process.executable.build_id.gnu", b)])
            .unwrap_or_default();
        let filename_strindex = self.s(file);
        self.d.mapping_table.push(Mapping {
            memory_start: start,
            memory_limit: limit,
            file_offset: start,
            filename_strindex,
            attribute_indices,
        });
        (self.d.mapping_table.len() - 1) as i32
    }

    /// A location; `lines` = (function index, line, column), innermost first.
    pub fn loc(
        &mut self,
        mapping: i32,
        address: u64,
        lines: &[(i32, i64, i64)],
        frame_type: Option<&str>,
    ) -> i32 {
        let attribute_indices = frame_type
            .map(|t| vec![self.attr_str("profile.frame.type", t)])
            .unwrap_or_default();
        self.d.location_table.push(Location {
            mapping_index: mapping,
            address,
            lines: lines
                .iter()
                .map(|&(function_index, line, column)| Line {
                    function_index,
                    line,
                    column,
                })
                .collect(),
            attribute_indices,
        });
        (self.d.location_table.len() - 1) as i32
    }

    /// A symbolized single-line location.
    pub fn fn_loc(&mut self, name: &str, file: &str, line: i64, frame_type: &str) -> i32 {
        let f = self.func(name, file);
        self.loc(0, 0, &[(f, line, 0)], Some(frame_type))
    }

    pub fn stack(&mut self, locations: &[i32]) -> i32 {
        self.d.stack_table.push(Stack {
            location_indices: locations.to_vec(),
        });
        (self.d.stack_table.len() - 1) as i32
    }

    pub fn link(&mut self, trace_id: [u8; 16], span_id: [u8; 8]) -> i32 {
        self.d.link_table.push(Link {
            trace_id: trace_id.to_vec(),
            span_id: span_id.to_vec(),
        });
        (self.d.link_table.len() - 1) as i32
    }

    pub fn value_type(&mut self, ty: &str, unit: &str) -> ValueType {
        ValueType {
            type_strindex: self.s(ty),
            unit_strindex: self.s(unit),
        }
    }

    /// A CPU profile (`samples/count`, period 50 ms of `cpu/nanoseconds`).
    pub fn cpu_profile(
        &mut self,
        time_unix_nano: u64,
        duration_nano: u64,
        samples: Vec<Sample>,
    ) -> Profile {
        Profile {
            sample_type: Some(self.value_type("samples", "count")),
            samples,
            time_unix_nano,
            duration_nano,
            period_type: Some(self.value_type("cpu", "nanoseconds")),
            period: 50_000_000,
            ..Default::default()
        }
    }

    pub fn request(self, resource_profiles: Vec<ResourceProfiles>) -> ExportProfilesServiceRequest {
        ExportProfilesServiceRequest {
            resource_profiles,
            dictionary: Some(self.d),
        }
    }
}

pub fn kv(key: &str, v: AnyValue) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(v),
        key_strindex: 0,
    }
}

pub fn resource(attributes: Vec<KeyValue>, profiles: Vec<Profile>) -> ResourceProfiles {
    ResourceProfiles {
        resource: Some(Resource {
            attributes,
            ..Default::default()
        }),
        scope_profiles: vec![ScopeProfiles {
            scope: None,
            profiles,
            schema_url: String::new(),
        }],
        schema_url: String::new(),
    }
}

pub fn sample(stack_index: i32, attribute_indices: Vec<i32>, timestamps: Vec<u64>) -> Sample {
    Sample {
        stack_index,
        attribute_indices,
        link_index: 0,
        values: vec![],
        timestamps_unix_nano: timestamps,
    }
}

/// The chunk checks of Sentry's rules, written out (independent of the validator), plus the
/// validator's errors. `allow_all_sparse` tolerates the validator's `no-samples` error for chunks
/// whose every thread is sparse (kept under `SparseThreadPolicy::Keep`).
pub fn check_chunk(c: &ProfileChunk, opts: &ChunkOptions, allow_all_sparse: bool) {
    assert_eq!(c.version, "2");
    assert!(is_sentry_id(&c.chunk_id), "chunk_id {}", c.chunk_id);
    assert!(
        is_sentry_id(&c.profiler_id),
        "profiler_id {}",
        c.profiler_id
    );
    let sdk = c.client_sdk.as_ref().expect("client_sdk");
    assert!(!sdk.name.is_empty() && !sdk.version.is_empty());
    assert!(!c.platform.is_empty());
    let p = &c.profile;
    assert!(!p.samples.is_empty());
    let mut used_stacks = vec![false; p.stacks.len()];
    let mut used_frames = vec![false; p.frames.len()];
    for s in &p.samples {
        assert!(s.stack_id < p.stacks.len());
        used_stacks[s.stack_id] = true;
        assert!(!s.thread_id.is_empty());
        assert!(
            s.thread_id.bytes().all(|b| b.is_ascii_digit() || b == b'-'),
            "thread id {}",
            s.thread_id
        );
        assert!(s.timestamp.is_finite());
    }
    assert!(used_stacks.iter().all(|u| *u), "unused stack");
    for st in &p.stacks {
        for &f in st {
            assert!(f < p.frames.len());
            used_frames[f] = true;
        }
    }
    assert!(used_frames.iter().all(|u| *u), "unused frame");
    for f in &p.frames {
        assert!(f.in_app.is_some(), "frame without in_app: {f:?}");
        // Relay's docs ask for a function, file or address but do not enforce it: a location
        // that gives none (address 0, no lines) is an empty frame, never a made-up address 0.
        if let Some(a) = &f.instruction_addr {
            assert!(a.starts_with("0x"), "{a}");
            assert_ne!(&**a, "0x0", "address 0 is unset: {f:?}");
        }
        if let Some(pl) = &f.platform {
            assert_ne!(&**pl, c.platform.as_str());
        }
    }
    if let Some(dm) = &c.debug_meta {
        assert!(!dm.images.is_empty());
        for img in &dm.images {
            assert_eq!(img.image_type, "symbolic");
        }
    }
    assert!(
        p.samples
            .windows(2)
            .all(|w| w[0].timestamp <= w[1].timestamp),
        "samples not sorted"
    );
    let first = secs_to_nanos(p.samples[0].timestamp).unwrap();
    let last = secs_to_nanos(p.samples[p.samples.len() - 1].timestamp).unwrap();
    assert!(
        last - first <= opts.effective_max_chunk_duration_ns() + 1_000,
        "chunk spans {} ns",
        last - first
    );
    assert!(last - first <= 66_000_000_000);
    let tids: BTreeSet<&str> = p.samples.iter().map(|s| s.thread_id.as_str()).collect();
    let meta: BTreeSet<&str> = p.thread_metadata.keys().map(String::as_str).collect();
    assert_eq!(tids, meta, "thread_metadata keys");
    let json = c.to_json();
    assert!(
        json.len() <= opts.effective_max_chunk_bytes(),
        "{} > {}",
        json.len(),
        opts.max_chunk_bytes
    );
    let mut back = ProfileChunk::from_json(&json).expect("parses back");
    // serde_json's default float parsing may be 1 ulp off; compare timestamps with a tolerance.
    for (b, s) in back.profile.samples.iter_mut().zip(&p.samples) {
        assert!((b.timestamp - s.timestamp).abs() < 1e-6);
        b.timestamp = s.timestamp;
    }
    assert!(&back == c, "chunk changed through JSON");
    let errors: Vec<_> = profilink_proto::validate::validate_chunk(c)
        .into_iter()
        .filter(|f| f.is_error() && !(allow_all_sparse && f.rule == "no-samples"))
        .collect();
    assert!(errors.is_empty(), "validator errors: {errors:?}");
}

/// One observation: (thread id, Unix ns, stack as function names or instruction addresses,
/// leaf first).
pub type Obs = (String, u64, Vec<String>);

/// The observations of a translation.
pub fn actual_observations(t: &ChunkTranslation) -> Vec<Obs> {
    let mut out = Vec::new();
    for c in &t.chunks {
        let frames: Vec<String> = c
            .profile
            .frames
            .iter()
            .map(|f| match (&f.function, &f.instruction_addr) {
                (Some(name), _) => name.to_string(),
                (None, Some(a)) => elf_address(a),
                (None, None) => String::new(),
            })
            .collect();
        for s in &c.profile.samples {
            let stack = c.profile.stacks[s.stack_id]
                .iter()
                .map(|&f| frames[f].clone())
                .collect();
            out.push((
                s.thread_id.to_string(),
                secs_to_nanos(s.timestamp).unwrap(),
                stack,
            ));
        }
    }
    out
}

/// A chunk `instruction_addr` as the OTLP address it was made from: an address in profilink's
/// synthetic image space is its slot base plus the ELF address (documented in
/// `profilink_proto::sentry::image_space`); other addresses are unchanged.
fn elf_address(a: &str) -> String {
    let v = parse_instruction_addr(a).expect("instruction_addr parses");
    match image_space::slot_of(v) {
        Some(base) => format!("{:#x}", v - base),
        None => a.to_owned(),
    }
}

fn text(v: &AttrValue<'_>) -> Option<String> {
    match v {
        AttrValue::Int(i) => Some(i.to_string()),
        AttrValue::Str(s) if !s.is_empty() => Some(
            s.parse::<u64>()
                .map(|u| u.to_string())
                .unwrap_or_else(|_| s.to_string()),
        ),
        _ => None,
    }
}

/// Brute force: the observations a CPU-profile request should translate to (timestamps, or
/// `samples/count` values spread over the profile window), stacks cut to `max_depth` frames.
pub fn expected_observations(req: &ExportProfilesServiceRequest, max_depth: usize) -> Vec<Obs> {
    let dict = Dictionary::new(req.dictionary.as_ref());
    let mut out = Vec::new();
    for rp in &req.resource_profiles {
        let res = rp
            .resource
            .as_ref()
            .map(|r| dict.key_values(&r.attributes).unwrap())
            .unwrap_or_default();
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                let st = p.sample_type.unwrap_or_default();
                if dict.string(st.type_strindex).unwrap() != "samples"
                    || dict.string(st.unit_strindex).unwrap() != "count"
                {
                    continue;
                }
                for s in &p.samples {
                    let attrs = dict.attributes(&s.attribute_indices).unwrap();
                    let find = |k: &str| {
                        attrs
                            .iter()
                            .rev()
                            .find(|a| a.key == k)
                            .or_else(|| res.iter().rev().find(|a| a.key == k))
                            .and_then(|a| text(&a.value))
                    };
                    let thread = find("thread.id")
                        .or_else(|| find("process.pid"))
                        .unwrap_or_else(|| "0".into());
                    let mut stack = Vec::new();
                    if let Some(st) = dict.stack(s.stack_index).unwrap() {
                        for &li in &st.location_indices {
                            let Some(loc) = dict.location(li).unwrap() else {
                                continue;
                            };
                            // Address 0 is unset: no address (see `actual_observations`).
                            let addr = if loc.address == 0 {
                                String::new()
                            } else {
                                format!("{:#x}", loc.address)
                            };
                            if loc.lines.is_empty() {
                                stack.push(addr.clone());
                            }
                            for line in &loc.lines {
                                let name = dict
                                    .function(line.function_index)
                                    .unwrap()
                                    .map(|f| dict.string(f.name_strindex).unwrap().to_owned())
                                    .unwrap_or_default();
                                stack.push(if name.is_empty() { addr.clone() } else { name });
                            }
                        }
                    }
                    stack.truncate(max_depth);
                    if !s.timestamps_unix_nano.is_empty() {
                        for &ts in &s.timestamps_unix_nano {
                            out.push((thread.clone(), ts, stack.clone()));
                        }
                    } else {
                        let v: i64 = s.values.iter().sum();
                        let n = v.max(0) as u64;
                        for i in 0..n {
                            let off = if p.duration_nano == 0 {
                                0
                            } else {
                                (i as u128 * p.duration_nano as u128 / n as u128) as u64
                            };
                            out.push((thread.clone(), p.time_unix_nano + off, stack.clone()));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Asserts two observation multisets are equal, timestamps to the microsecond.
pub fn assert_same_observations(mut actual: Vec<Obs>, mut expected: Vec<Obs>) {
    assert_eq!(actual.len(), expected.len(), "observation counts");
    let key = |o: &Obs| (o.0.clone(), o.2.clone(), o.1);
    actual.sort_by_key(key);
    expected.sort_by_key(key);
    for (a, e) in actual.iter().zip(&expected) {
        assert_eq!(a.0, e.0, "thread");
        assert_eq!(a.2, e.2, "stack");
        assert!(a.1.abs_diff(e.1) <= 1_000, "timestamp {} vs {}", a.1, e.1);
    }
}

/// The repository's OTLP fixtures (`tests/fixtures/otlp/*.pb`), decoded, with their file names,
/// sorted by name.
pub fn otlp_fixtures() -> Vec<(String, ExportProfilesServiceRequest)> {
    use prost::Message;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/otlp");
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("fixtures directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pb"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            let req = ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), req)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 4, "expected the 4 OTLP fixtures");
    out
}
