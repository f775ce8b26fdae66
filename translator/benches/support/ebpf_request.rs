//! The benchmarks' 1,000,000-observation eBPF-profiler-shaped request, shared (by `#[path]`)
//! by `benches/otlp_to_sentry.rs` and the workspace's `examples/translate_whole.rs`.
//!
//! Shape (like `ebpf-profile.pb`, scaled up): 4 processes (resources) × 10 threads, 20 Hz
//! sampling for 1250 s per thread, 2,000 unique stacks of depth 20–60 (go, native and kernel
//! frames over shared roots; native frames unsymbolized with build-id mappings), samples grouped
//! per (stack, thread, 5 s reporting window) with their timestamps, as the profiler reports them.
//! Deterministic (fixed seed): every build gives the same request.

use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, Function, KeyValue, KeyValueAndUnit, Line, Link,
    Location, Mapping, Profile, ProfilesDictionary, Resource, ResourceProfiles, Sample,
    ScopeProfiles, Stack, ValueType, any_value,
};
use std::collections::BTreeMap;

/// Observations in the request.
pub const SAMPLES: u64 = 1_000_000;
const PROCESSES: u64 = 4;
const THREADS: u64 = 10;
const HZ: u64 = 20;
/// Unique stacks in the request.
pub const STACKS: usize = 2_000;
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

/// Builds the request (about a second in release builds).
pub fn build_request() -> ExportProfilesServiceRequest {
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
