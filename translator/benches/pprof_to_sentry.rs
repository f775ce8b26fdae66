//! pprof -> Sentry throughput against its floor, on the real Go CPU profile
//! (`tests/fixtures/pprof/go-cpu-labels-inline.pb.gz`: labels, inlined functions, two sample
//! types) with its samples repeated `COPIES` times (a longer recording of the same service).
//!
//! * `translate`: `pprof_bytes_to_chunks` on the inflated bytes + `ProfileChunk::write_json`
//!   of every chunk (pprof decode, pprof -> OTLP, OTLP -> Sentry, JSON).
//! * `floor`: prost decode of the same bytes plus serde_json of one Sentry sample
//!   (`stack_id`, `thread_id`, `timestamp`) per observation, nothing else.
//!
//! After criterion's measurements, `ROUNDS` interleaved rounds of both are timed and the
//! medians printed with the ratio `translate / floor` (the target is at most 2) and the number
//! of observations each side made. Skipped under `--profile-time`.

use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use profilink_translator::PprofOptions;
use profilink_translator::otlp_to_sentry::ChunkOptions;
use profilink_translator::pprof::{PprofProfile, decode_pprof};
use profilink_translator::pprof_bytes_to_chunks;
use prost::Message;
use serde::Serialize;
use std::time::Instant;

/// As in the `profilink` binary.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const COPIES: usize = 50;
const ROUNDS: usize = 21;

/// The fixture's profile, inflated, with its samples repeated [`COPIES`] times.
fn input() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/pprof/go-cpu-labels-inline.pb.gz"
    );
    let gz = std::fs::read(path).expect("the Go CPU fixture (tests/fixtures/pprof)");
    let mut p = decode_pprof(&gz, &PprofOptions::default()).expect("fixture decodes");
    let samples = p.sample.clone();
    for _ in 1..COPIES {
        p.sample.extend(samples.iter().cloned());
    }
    p.duration_nanos *= COPIES as i64;
    p.encode_to_vec()
}

fn translate(bytes: &[u8], options: &ChunkOptions, out: &mut Vec<u8>) -> usize {
    let t = pprof_bytes_to_chunks(bytes, &PprofOptions::default(), options).expect("translates");
    out.clear();
    let mut n = 0;
    for c in &t.chunks {
        c.write_json(out);
        n += c.profile.samples.len();
    }
    n
}

#[derive(Serialize)]
struct Sample<'a> {
    stack_id: usize,
    thread_id: &'a str,
    timestamp: f64,
}

/// The floor: decode, and one serialized sample per observation of the count type (spread over
/// the duration, as the translation must).
fn floor(bytes: &[u8], out: &mut Vec<u8>) -> usize {
    let p = PprofProfile::decode(bytes).expect("decode");
    let column = p
        .sample_type
        .iter()
        .position(|t| p.string_table[t.unit as usize] == "count")
        .unwrap_or(0);
    let start = p.time_nanos as f64 / 1e9;
    let mut samples = Vec::new();
    for (i, s) in p.sample.iter().enumerate() {
        for k in 0..s.value[column].max(0) {
            samples.push(Sample {
                stack_id: i,
                thread_id: "0",
                timestamp: start + (k as f64) * 0.01,
            });
        }
    }
    out.clear();
    serde_json::to_writer(&mut *out, &samples).expect("serialize");
    samples.len()
}

fn bench(c: &mut Criterion) {
    let bytes = input();
    let options = ChunkOptions::default();
    let mut out = Vec::new();
    let observations = floor(&bytes, &mut out);
    let mut g = c.benchmark_group("pprof_to_sentry");
    g.throughput(Throughput::Elements(observations as u64));
    g.bench_function("translate", |b| {
        b.iter(|| black_box(translate(&bytes, &options, &mut out)))
    });
    g.bench_function("floor", |b| b.iter(|| black_box(floor(&bytes, &mut out))));
    g.finish();
    if std::env::args().any(|a| a == "--profile-time") {
        return;
    }
    let (mut t, mut f) = (Vec::new(), Vec::new());
    let (mut n_t, mut n_f) = (0, 0);
    for _ in 0..ROUNDS {
        let s = Instant::now();
        n_t = black_box(translate(&bytes, &options, &mut out));
        t.push(s.elapsed().as_secs_f64());
        let s = Instant::now();
        n_f = black_box(floor(&bytes, &mut out));
        f.push(s.elapsed().as_secs_f64());
    }
    t.sort_by(f64::total_cmp);
    f.sort_by(f64::total_cmp);
    let (mt, mf) = (t[ROUNDS / 2], f[ROUNDS / 2]);
    println!(
        "pprof_to_sentry: {} bytes, translate {:.3} ms ({n_t} observations), floor {:.3} ms ({n_f} observations), ratio {:.2} (target <= 2)",
        bytes.len(),
        mt * 1e3,
        mf * 1e3,
        mt / mf
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
