//! Sentry → OTLP throughput on 1,000,000 samples: 17 chunks of ~58.8k samples built from the
//! real fixture chunk's frames and stacks (samples repeated with shifted timestamps), serialized
//! to JSON first.
//!
//! * `parse_only`: `ProfileChunk::from_json` of every chunk (the floor).
//! * `parse_translate`: parse + `to_otlp` to one `ExportProfilesServiceRequest` (no encode).
//! * `parse_translate_encode`: the same + prost encoding of the request.
//! * `parse_translate_linked`: parse + translate with `TransactionLinks` from the fixture's
//!   transactions (every observation does a link lookup).
//! * `translate_only`, `translate_only_linked`: translation of pre-parsed chunks, without and
//!   with links.
//!
//! Throughput is reported in samples (elements) per second.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use profilink_proto::sentry::{Envelope, ProfileChunk, Sample, Transaction};
use profilink_translator::sentry_to_otlp::{OtlpOptions, SentryInput, to_otlp};
use profilink_translator::{NoLinks, TransactionLinks};
use prost::Message;
use std::hint::black_box;
use std::time::Duration;

const TOTAL: usize = 1_000_000;
const CHUNKS: usize = 17;

fn fixture_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/sentry/python"
    ))
}

fn fixture_chunk() -> ProfileChunk {
    let bytes = std::fs::read(fixture_dir().join("trace-chunk-00.envelope")).expect("fixture");
    let env = Envelope::parse(&bytes).expect("envelope");
    let item = env
        .items
        .iter()
        .find(|i| i.is_profile_chunk())
        .expect("chunk item");
    ProfileChunk::from_json(&item.payload).expect("chunk")
}

fn transactions() -> Vec<Transaction> {
    std::fs::read_to_string(fixture_dir().join("trace-transactions.jsonl"))
        .expect("transactions")
        .lines()
        .filter_map(|l| Transaction::from_json(l.as_bytes()).ok())
        .collect()
}

/// The JSON of 17 chunks holding 1,000,000 samples in total.
fn chunk_set() -> Vec<Vec<u8>> {
    let base = fixture_chunk();
    let src = &base.profile.samples;
    let first = src.first().map_or(0.0, |s| s.timestamp);
    let last = src.last().map_or(0.0, |s| s.timestamp);
    let span = last - first + 0.010;
    let mut out = Vec::with_capacity(CHUNKS);
    for c in 0..CHUNKS {
        let (lo, hi) = (c * TOTAL / CHUNKS, (c + 1) * TOTAL / CHUNKS);
        let mut chunk = base.clone();
        chunk.chunk_id = format!("{:032x}", c + 1);
        chunk.profile.samples = (lo..hi)
            .map(|i| {
                let s = &src[i % src.len()];
                Sample {
                    timestamp: s.timestamp + (i / src.len()) as f64 * span,
                    stack_id: s.stack_id,
                    thread_id: s.thread_id.clone(),
                }
            })
            .collect();
        out.push(chunk.to_json());
    }
    out
}

fn parse(set: &[Vec<u8>]) -> Vec<ProfileChunk> {
    set.iter()
        .map(|j| ProfileChunk::from_json(j).expect("parse"))
        .collect()
}

fn bench(c: &mut Criterion) {
    let set = chunk_set();
    let bytes: usize = set.iter().map(Vec::len).sum();
    eprintln!(
        "chunk set: {CHUNKS} chunks, {TOTAL} samples, {:.1} MB of JSON",
        bytes as f64 / 1e6
    );
    let txns = transactions();
    let links = TransactionLinks::new(&txns);
    let options = OtlpOptions::default();
    let parsed = parse(&set);

    let mut g = c.benchmark_group("sentry_to_otlp");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(TOTAL as u64));
    g.bench_function("parse_only", |b| {
        b.iter(|| black_box(parse(black_box(&set))))
    });
    g.bench_function("parse_translate", |b| {
        b.iter(|| {
            let chunks = parse(black_box(&set));
            let t = to_otlp(
                &SentryInput {
                    chunks: &chunks,
                    v1_profiles: &[],
                },
                &NoLinks,
                &options,
            );
            black_box(t)
        })
    });
    g.bench_function("parse_translate_encode", |b| {
        b.iter(|| {
            let chunks = parse(black_box(&set));
            let t = to_otlp(
                &SentryInput {
                    chunks: &chunks,
                    v1_profiles: &[],
                },
                &NoLinks,
                &options,
            );
            black_box(t.request.encode_to_vec())
        })
    });
    g.bench_function("parse_translate_linked", |b| {
        b.iter(|| {
            let chunks = parse(black_box(&set));
            let t = to_otlp(
                &SentryInput {
                    chunks: &chunks,
                    v1_profiles: &[],
                },
                &links,
                &options,
            );
            black_box(t)
        })
    });
    g.bench_function("translate_only", |b| {
        b.iter(|| {
            let t = to_otlp(
                &SentryInput {
                    chunks: black_box(&parsed),
                    v1_profiles: &[],
                },
                &NoLinks,
                &options,
            );
            black_box(t)
        })
    });
    g.bench_function("translate_only_linked", |b| {
        b.iter(|| {
            let t = to_otlp(
                &SentryInput {
                    chunks: black_box(&parsed),
                    v1_profiles: &[],
                },
                &links,
                &options,
            );
            black_box(t)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
