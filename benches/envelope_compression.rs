//! Compressing Sentry envelopes: the exporter's per-thread compressors against a fresh
//! compressor per body (what `flate2::write::GzEncoder` / `zstd::bulk::compress` do).
//!
//! Bodies are real envelopes: the eBPF fixture (`ebpf-profile.pb`) translated into chunks,
//! one envelope per chunk, as the exporter sends them (a few KB to a few tens of KB each).
//! Levels are the exporter's defaults (gzip 2, zstd 3). `reused` is
//! `profilink_exporter::testing::compress_level`; `fresh` sets up a new compressor
//! for every body.

use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use profilink_exporter::Compression;
use profilink_exporter::testing::compress_level;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::Envelope;
use profilink_translator::otlp_to_sentry::{ChunkOptions, request_to_chunks};
use prost::Message;
use std::io::Write;

// As in the `profilink` binary.
profilink::global_allocator!();

fn envelopes() -> Vec<Vec<u8>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/otlp/ebpf-profile.pb");
    let bytes = std::fs::read(&path).expect("the eBPF fixture (tests/fixtures)");
    let req = ExportProfilesServiceRequest::decode(bytes.as_slice()).expect("fixture decodes");
    request_to_chunks(&req, &ChunkOptions::default())
        .chunks
        .iter()
        .map(|c| {
            Envelope::for_chunk_json(c.to_json(), &c.platform, "profilink", "bench").to_bytes()
        })
        .collect()
}

fn fresh_gzip(body: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(2));
    e.write_all(body).expect("in-memory gzip");
    e.finish().expect("in-memory gzip")
}

fn bench(c: &mut Criterion) {
    let bodies = envelopes();
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    eprintln!(
        "{} envelopes, {bytes} bytes (mean {} bytes)",
        bodies.len(),
        bytes / bodies.len().max(1)
    );
    let mut g = c.benchmark_group("envelope_compression");
    g.throughput(Throughput::Bytes(bytes as u64));
    let all = |f: &dyn Fn(&[u8]) -> usize| bodies.iter().map(|b| f(b)).sum::<usize>();
    g.bench_function("gzip_reused", |b| {
        b.iter(|| {
            all(&|x| compress_level(black_box(x), Compression::Gzip, 2).map_or(0, |v| v.len()))
        })
    });
    g.bench_function("gzip_fresh", |b| {
        b.iter(|| all(&|x| fresh_gzip(black_box(x)).len()))
    });
    g.bench_function("zstd_reused", |b| {
        b.iter(|| {
            all(&|x| compress_level(black_box(x), Compression::Zstd, 3).map_or(0, |v| v.len()))
        })
    });
    g.bench_function("zstd_fresh", |b| {
        b.iter(|| all(&|x| zstd::bulk::compress(black_box(x), 3).map_or(0, |v| v.len())))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
