//! OTLP -> Sentry throughput on a realistic eBPF-profiler-shaped request of 1,000,000 samples.
//!
//! Shape (like `ebpf-profile.pb`, scaled up): 4 processes (resources) × 10 threads, 20 Hz
//! sampling for 1250 s per thread, 2,000 unique stacks of depth 20–60 (go, native and kernel
//! frames over shared roots; native frames unsymbolized with build-id mappings), samples grouped
//! per (stack, thread, 5 s reporting window) with their timestamps, as the profiler reports them.
//!
//! * `translate_and_serialize`: `translate_request` + `ProfileChunk::to_json` of every chunk.
//! * `serialize_only`: `to_json` of the already-built chunks (the floor).
//!
//! Before measuring, one pass of each is run under a counting global allocator and the number
//! of allocations and bytes allocated is printed (counting is switched off while measuring),
//! with a SHA-256 of the output (chunks' JSON, links and counters) so that an optimization that
//! changes the output shows.
//!
//! After criterion's measurements, `ROUNDS` interleaved rounds of translate+serialize,
//! serialize-only and translate-only are timed and the medians printed with the ratio
//! `translate+serialize / serialize` (the target is at most 1.5). Interleaving makes the ratio
//! fair on a busy machine: both sides see the same load. Skipped under `--profile-time`.

use criterion::{BatchSize, Criterion, Throughput, black_box, criterion_group, criterion_main};
use mimalloc::MiMalloc;
use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, Function, KeyValue, KeyValueAndUnit, Line, Link,
    Location, Mapping, Profile, ProfilesDictionary, Resource, ResourceProfiles, Sample,
    ScopeProfiles, Stack, ValueType, any_value,
};
use profilink_proto::sentry::ProfileChunk;
use profilink_translator::otlp_to_sentry::{Options, translate_request};
use sha2::{Digest, Sha256};
use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counts allocations over the `profilink` binary's allocator (mimalloc), so both sides of
/// the ratio run on the allocator the service ships with.
struct Counting;
/// Counting is on only around the counted passes, so measured runs pay one relaxed load.
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        unsafe { MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        }
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SAMPLES: u64 = 1_000_000;
const PROCESSES: u64 = 4;
const THREADS: u64 = 10;
const HZ: u64 = 20;
const STACKS: usize = 2_000;
const T0: u64 = 1_795_317_063_000_000_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default)]
struct Dict {
    d: ProfilesDictionary,
    strings: BTreeMap<String, i32>,
}

impl Dict {
    fn s(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.d.string_table.len() as i32;
        self.d.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }
    fn attr(&mut self, key: &str, value: any_value::Value) -> i32 {
        let key_strindex = self.s(key);
        self.d.attribute_table.push(KeyValueAndUnit {
            key_strindex,
            value: Some(AnyValue { value: Some(value) }),
            unit_strindex: 0,
        });
        (self.d.attribute_table.len() - 1) as i32
    }
}

fn build_request() -> ExportProfilesServiceRequest {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut d = Dict::default();
    d.s("");
    d.d.mapping_table.push(Mapping::default());
    d.d.location_table.push(Location::default());
    d.d.function_table.push(Function::default());
    d.d.link_table.push(Link::default());
    d.d.attribute_table.push(KeyValueAndUnit::default());
    d.d.stack_table.push(Stack::default());

    // Mappings: the executable, libc, vmlinux.
    let mut mappings = Vec::new();
    for (file, start, limit, build_id) in [
        (
            "/usr/local/bin/server",
            0x400000u64,
            0x5400000u64,
            "e1dd5700698e4a56dde5ffc532d263483409e33b",
        ),
        (
            "libc.so.6",
            0x28000,
            0x1b0000,
            "274eec488d230825a136fa9c4d85370fed7a0a5e",
        ),
        ("vmlinux", 0, 0, "e97b80c39b0187ecf6cb349fb27e7707b58a8fe2"),
    ] {
        let a = d.attr(
            "process.executable.build_id.gnu",
            any_value::Value::StringValue(build_id.into()),
        );
        let filename_strindex = d.s(file);
        d.d.mapping_table.push(Mapping {
            memory_start: start,
            memory_limit: limit,
            file_offset: start,
            filename_strindex,
            attribute_indices: vec![a],
        });
        mappings.push((d.d.mapping_table.len() - 1) as i32);
    }
    let ft_go = d.attr(
        "profile.frame.type",
        any_value::Value::StringValue("go".into()),
    );
    let ft_native = d.attr(
        "profile.frame.type",
        any_value::Value::StringValue("native".into()),
    );
    let ft_kernel = d.attr(
        "profile.frame.type",
        any_value::Value::StringValue("kernel".into()),
    );

    // 3,000 locations: 2,000 go (symbolized), 700 native (unsymbolized), 300 kernel.
    let mut go_locs = Vec::new();
    let mut native_locs = Vec::new();
    let mut kernel_locs = Vec::new();
    for i in 0..3000u64 {
        let (kind, list) = match i {
            0..2000 => (0, &mut go_locs),
            2000..2700 => (1, &mut native_locs),
            _ => (2, &mut kernel_locs),
        };
        let loc = match kind {
            0 => {
                let name_strindex = d.s(&format!(
                    "github.com/acme/server/pkg{}.(*Handler).Method{i}",
                    i % 37
                ));
                let filename_strindex =
                    d.s(&format!("github.com/acme/server/pkg{}/handler.go", i % 37));
                d.d.function_table.push(Function {
                    name_strindex,
                    system_name_strindex: 0,
                    filename_strindex,
                    start_line: 0,
                });
                let f = (d.d.function_table.len() - 1) as i32;
                Location {
                    mapping_index: mappings[0],
                    address: 0x400000 + i * 64,
                    lines: vec![Line {
                        function_index: f,
                        line: (i % 900 + 1) as i64,
                        column: 0,
                    }],
                    attribute_indices: vec![ft_go],
                }
            }
            1 => Location {
                mapping_index: mappings[1],
                address: 0x28000 + i * 16,
                lines: vec![],
                attribute_indices: vec![ft_native],
            },
            _ => {
                let name_strindex = d.s(&format!("kernel_function_{i}"));
                d.d.function_table.push(Function {
                    name_strindex,
                    ..Default::default()
                });
                let f = (d.d.function_table.len() - 1) as i32;
                Location {
                    mapping_index: mappings[2],
                    address: 0x1000000 + i,
                    lines: vec![Line {
                        function_index: f,
                        line: 0,
                        column: 0,
                    }],
                    attribute_indices: vec![ft_kernel],
                }
            }
        };
        d.d.location_table.push(loc);
        list.push((d.d.location_table.len() - 1) as i32);
    }

    // 2,000 stacks of depth 20-60: kernel/native leaves over go frames over shared roots.
    let roots: Vec<i32> = go_locs[..8].to_vec();
    let mut stacks = Vec::new();
    for _ in 0..STACKS {
        let depth = 20 + rng.below(41) as usize;
        let mut s = Vec::with_capacity(depth);
        match rng.below(4) {
            0 => {
                for _ in 0..(2 + rng.below(4)) {
                    s.push(kernel_locs[rng.below(kernel_locs.len() as u64) as usize]);
                }
            }
            1 => {
                for _ in 0..(1 + rng.below(3)) {
                    s.push(native_locs[rng.below(native_locs.len() as u64) as usize]);
                }
            }
            _ => {}
        }
        while s.len() < depth - roots.len() {
            s.push(go_locs[8 + rng.below(go_locs.len() as u64 - 8) as usize]);
        }
        s.extend_from_slice(&roots);
        d.d.stack_table.push(Stack {
            location_indices: s,
        });
        stacks.push((d.d.stack_table.len() - 1) as i32);
    }

    let sample_type = ValueType {
        type_strindex: d.s("samples"),
        unit_strindex: d.s("count"),
    };
    let period_type = ValueType {
        type_strindex: d.s("cpu"),
        unit_strindex: d.s("nanoseconds"),
    };
    let period = 1_000_000_000 / HZ;
    let ticks_per_thread = SAMPLES / (PROCESSES * THREADS);
    let window_ticks = 5 * HZ;
    let mut resource_profiles = Vec::new();
    for p in 0..PROCESSES {
        let pid = 1000 + p as i64;
        let thread_attrs: Vec<Vec<i32>> = (0..THREADS)
            .map(|t| {
                vec![
                    d.attr(
                        "thread.id",
                        any_value::Value::IntValue(pid * 100 + t as i64),
                    ),
                    d.attr(
                        "thread.name",
                        any_value::Value::StringValue(format!("worker-{t}")),
                    ),
                ]
            })
            .collect();
        // Each process uses its own slice of 500 stacks, skewed towards a few hot ones.
        let proc_stacks = &stacks[(p as usize * 500)..(p as usize * 500 + 500)];
        let mut samples = Vec::new();
        let mut tick = 0;
        while tick < ticks_per_thread {
            let end = (tick + window_ticks).min(ticks_per_thread);
            for (t, attrs) in thread_attrs.iter().enumerate() {
                let mut by_stack: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
                for k in tick..end {
                    let r = rng.below(1000);
                    let idx = if r < 700 { r % 20 } else { r % 500 } as usize;
                    let jitter = rng.below(1_000_000);
                    let ts = T0 + k * period + t as u64 * 1_000_003 + jitter;
                    by_stack.entry(proc_stacks[idx]).or_default().push(ts);
                }
                for (stack_index, timestamps_unix_nano) in by_stack {
                    samples.push(Sample {
                        stack_index,
                        attribute_indices: attrs.clone(),
                        link_index: 0,
                        values: vec![],
                        timestamps_unix_nano,
                    });
                }
            }
            tick = end;
        }
        resource_profiles.push(ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![
                    KeyValue {
                        key: "process.pid".into(),
                        value: Some(AnyValue {
                            value: Some(any_value::Value::IntValue(pid)),
                        }),
                        key_strindex: 0,
                    },
                    KeyValue {
                        key: "process.executable.name".into(),
                        value: Some(AnyValue {
                            value: Some(any_value::Value::StringValue("server".into())),
                        }),
                        key_strindex: 0,
                    },
                ],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: None,
                profiles: vec![Profile {
                    sample_type: Some(sample_type),
                    samples,
                    time_unix_nano: T0,
                    duration_nano: ticks_per_thread * period + 1_000_000_000,
                    period_type: Some(period_type),
                    period: period as i64,
                    ..Default::default()
                }],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        });
    }
    ExportProfilesServiceRequest {
        resource_profiles,
        dictionary: Some(d.d),
    }
}

fn serialize_all(chunks: &[ProfileChunk]) -> usize {
    chunks.iter().map(|c| c.to_json().len()).sum()
}

fn translate_and_serialize(req: &ExportProfilesServiceRequest, opts: &Options) -> usize {
    let t = translate_request(req, opts);
    serialize_all(&t.chunks)
}

fn counted<T>(f: impl FnOnce() -> T) -> (T, u64, u64) {
    let (a0, b0) = (
        ALLOCS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    COUNTING.store(true, Ordering::SeqCst);
    let out = f();
    COUNTING.store(false, Ordering::SeqCst);
    (
        out,
        ALLOCS.load(Ordering::Relaxed) - a0,
        BYTES.load(Ordering::Relaxed) - b0,
    )
}

/// Interleaved rounds for the ratio line.
const ROUNDS: usize = 15;

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `ROUNDS` interleaved rounds of the three workloads and prints medians and the ratio.
fn ratio_line(req: &ExportProfilesServiceRequest, opts: &Options, chunks: &[ProfileChunk]) {
    let (mut both, mut floor, mut translate) = (Vec::new(), Vec::new(), Vec::new());
    let time = |f: &mut dyn FnMut() -> usize| {
        let start = Instant::now();
        black_box(f());
        start.elapsed().as_secs_f64() * 1e3
    };
    for _ in 0..ROUNDS {
        both.push(time(&mut || translate_and_serialize(black_box(req), opts)));
        floor.push(time(&mut || serialize_all(black_box(chunks))));
        translate.push(time(&mut || {
            translate_request(black_box(req), opts).chunks.len()
        }));
    }
    let (both, floor, translate) = (median_ms(both), median_ms(floor), median_ms(translate));
    eprintln!(
        "ratio: translate+serialize / serialize = {:.2}x (medians of {ROUNDS} interleaved rounds: translate+serialize {both:.1} ms, serialize {floor:.1} ms, translate {translate:.1} ms)",
        both / floor
    );
}

fn bench(c: &mut Criterion) {
    let req = build_request();
    let opts = Options::default();
    let t = translate_request(&req, &opts);
    let samples = t.stats.samples_out;
    assert_eq!(samples, SAMPLES);
    let otlp_samples: usize = req
        .resource_profiles
        .iter()
        .map(|r| r.scope_profiles[0].profiles[0].samples.len())
        .sum();
    let (bytes, ser_allocs, ser_bytes) = counted(|| serialize_all(&t.chunks));
    // A digest of everything the translation produced, so that an optimization that changes
    // the output shows up here.
    let mut h = Sha256::new();
    for c in &t.chunks {
        h.update(c.to_json());
    }
    h.update(format!("{:?}{:?}", t.links, t.stats));
    let (translation, tr_allocs, tr_bytes) = counted(|| translate_request(&req, &opts));
    drop(translation);
    eprintln!(
        "request: {} OTLP samples, {} observations, {} unique stacks; output: {} chunks, {} frames total, {:.1} MB JSON",
        otlp_samples,
        samples,
        STACKS,
        t.chunks.len(),
        t.chunks
            .iter()
            .map(|c| c.profile.frames.len())
            .sum::<usize>(),
        bytes as f64 / 1e6
    );
    eprintln!("output sha256: {}", hex::encode(h.finalize()));
    eprintln!(
        "allocations: translate {} allocs / {:.1} MB ({:.2} allocs per sample); serialize {} allocs / {:.1} MB",
        tr_allocs,
        tr_bytes as f64 / 1e6,
        tr_allocs as f64 / samples as f64,
        ser_allocs,
        ser_bytes as f64 / 1e6
    );

    let mut g = c.benchmark_group("otlp_to_sentry");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(15));
    g.throughput(Throughput::Elements(samples));
    g.bench_function("translate_and_serialize", |b| {
        b.iter(|| black_box(translate_and_serialize(black_box(&req), &opts)))
    });
    g.bench_function("serialize_only", |b| {
        b.iter_batched_ref(
            || (),
            |_| black_box(serialize_all(black_box(&t.chunks))),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("translate_only", |b| {
        b.iter(|| black_box(translate_request(black_box(&req), &opts).chunks.len()))
    });
    g.finish();
    if !std::env::args().any(|a| a == "--profile-time") {
        ratio_line(&req, &opts, &t.chunks);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
