//! OTLP -> Sentry throughput on a realistic eBPF-profiler-shaped request of 1,000,000 samples
//! (built by `support/ebpf_request.rs`, shared with `examples/translate_whole.rs`, which times
//! the whole `profilink translate` process on the same request).
//!
//! * `translate_and_serialize`: `request_to_chunks` + `ProfileChunk::to_json` of every chunk.
//! * `serialize_only`: `to_json` of the already-built chunks (the floor).
//!
//! Before measuring, one pass of each is run under a counting global allocator and the number
//! of allocations and bytes allocated is printed (counting is switched off while measuring),
//! with a SHA-256 of the output (chunks' JSON, links and counters) so that an optimization that
//! changes the output shows.
//!
//! After criterion's measurements, `ROUNDS` interleaved rounds of translate+serialize,
//! serialize-only and translate-only are timed and the medians printed with the ratio
//! `translate+serialize / serialize` (the target is at most 1.5), for this request and for the
//! 1,000,000-observation single-session one of `support/session_request.rs` (150 consecutive
//! profiles of one SDK process, issue #33). Interleaving makes the ratio fair on a busy
//! machine: both sides see the same load. Skipped under `--profile-time`.

use criterion::{BatchSize, Criterion, Throughput, black_box, criterion_group, criterion_main};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use profilink_translator::otlp_to_sentry::{ChunkOptions, request_to_chunks};
use sha2::{Digest, Sha256};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tikv_jemallocator::Jemalloc;

/// Counts allocations over the `profilink` binary's allocator (jemalloc), so both sides of
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
        unsafe { Jemalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { Jemalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        }
        unsafe { Jemalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[path = "support/ebpf_request.rs"]
mod ebpf_request;
#[path = "support/session_request.rs"]
mod session_request;
use ebpf_request::{SAMPLES, STACKS, build_request};

fn serialize_all(chunks: &[ProfileChunk]) -> usize {
    chunks.iter().map(|c| c.to_json().len()).sum()
}

fn translate_and_serialize(req: &ExportProfilesServiceRequest, opts: &ChunkOptions) -> usize {
    let t = request_to_chunks(req, opts);
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
fn ratio_line(
    name: &str,
    req: &ExportProfilesServiceRequest,
    opts: &ChunkOptions,
    chunks: &[ProfileChunk],
) {
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
            request_to_chunks(black_box(req), opts).chunks.len()
        }));
    }
    let (both, floor, translate) = (median_ms(both), median_ms(floor), median_ms(translate));
    eprintln!(
        "{name}: ratio translate+serialize / serialize = {:.2}x (medians of {ROUNDS} interleaved rounds: translate+serialize {both:.1} ms, serialize {floor:.1} ms, translate {translate:.1} ms)",
        both / floor
    );
}

fn bench(c: &mut Criterion) {
    let req = build_request();
    let opts = ChunkOptions::default();
    let t = request_to_chunks(&req, &opts);
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
    let (translation, tr_allocs, tr_bytes) = counted(|| request_to_chunks(&req, &opts));
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
        b.iter(|| black_box(request_to_chunks(black_box(&req), &opts).chunks.len()))
    });
    g.finish();
    if !std::env::args().any(|a| a == "--profile-time") {
        ratio_line("ebpf", &req, &opts, &t.chunks);
        let session = session_request::build_request();
        let chunks = request_to_chunks(&session, &opts).chunks;
        ratio_line("session", &session, &opts, &chunks);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
