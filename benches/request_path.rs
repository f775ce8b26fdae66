//! The service's per-request CPU path, stage by stage, on the load test's request shape.
//!
//! The request is what `examples/load/` sends: the real eBPF fixture (`ebpf-profile.pb`)
//! with 16 copies of its resources (distinct `service.instance.id`s, so ~100 profiler
//! sessions of a few dozen observations each). Each stage is measured alone, per request:
//!
//! * `decode`: gunzip + protobuf decode (what the gRPC receiver does);
//! * `translate`: `otlp_to_sentry::request_to_chunks`;
//! * `queue_encode`: the exporter's input-log record (`testing::encode_batch`);
//! * `merge`: 12 consecutive 5 s rounds pushed into the [`ChunkAccumulator`] and flushed as
//!   60 s chunks (time per request: the total / 12);
//! * `deliver`: the merged chunks of those 12 rounds serialized into envelopes and gzipped at
//!   the exporter's default level (time per request: the total / 12).
//!
//! The sum is the service's CPU per request apart from networking, HTTP/2, the queue's disk
//! writes and scheduling, so `observations / sum` bounds its samples/s per core from above.
//! The summary line prints each stage's share.

#[path = "../examples/support/load_request.rs"]
mod load_request;

use criterion::{BatchSize, Criterion, Throughput, black_box, criterion_group, criterion_main};
use flate2::read::GzDecoder;
use profilink_exporter::testing::compress_written;
use profilink_exporter::testing::{self, ChunkAccumulator, Emitted};
use profilink_exporter::{AccumulateConfig, Compression, CompressionParams};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_translator::otlp_to_sentry::{ChunkOptions, request_to_chunks};
use prost::Message;
use std::io::Read;
use std::time::{Duration, Instant};

// As in the `profilink` binary.
profilink::global_allocator!();

const ROUND_NS: u64 = 5_000_000_000;
const ROUNDS: usize = 12;
const COPIES: usize = 16;

fn fixture() -> ExportProfilesServiceRequest {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/otlp/ebpf-profile.pb");
    let bytes = std::fs::read(&path).expect("the eBPF fixture (tests/fixtures)");
    ExportProfilesServiceRequest::decode(bytes.as_slice()).expect("fixture decodes")
}

/// The load test's request of round `round` (5 s rounds).
fn request(fixture: &ExportProfilesServiceRequest, round: usize) -> ExportProfilesServiceRequest {
    let mut req = load_request::replicated(fixture, "bench", COPIES);
    load_request::shift(&mut req, round as u64 * ROUND_NS);
    req
}

fn decode(gz: &[u8]) -> ExportProfilesServiceRequest {
    let mut raw = Vec::new();
    GzDecoder::new(gz).read_to_end(&mut raw).expect("gunzip");
    ExportProfilesServiceRequest::decode(raw.as_slice()).expect("decode")
}

fn routed(chunks: Vec<ProfileChunk>) -> Vec<(String, ProfileChunk)> {
    chunks.into_iter().map(|c| (String::new(), c)).collect()
}

/// Pushes every round's chunks (with the hashes and sizes the queue encoding computed, as the
/// exporter does) and flushes.
/// One round: the routed chunks of a request and what the queue encoding found about them.
type Round = (Vec<(String, ProfileChunk)>, Vec<testing::ChunkInfo>);

fn merge(rounds: &[Round]) -> Vec<Emitted> {
    let mut acc = ChunkAccumulator::new(AccumulateConfig {
        chunk_idle_timeout: Duration::from_secs(3600),
        ..AccumulateConfig::default()
    });
    let now = Instant::now();
    let mut out = Vec::new();
    for (id, (items, infos)) in rounds.iter().enumerate() {
        for (part, ((route, chunk), info)) in items.iter().zip(infos).enumerate() {
            acc.push_part(
                id as u64,
                part as u32,
                route,
                chunk,
                &[],
                Some(&info.frame_hashes),
                info.approx_bytes,
                now,
                &mut out,
            );
        }
    }
    out.extend(acc.flush_all());
    out
}

fn deliver(emitted: &[Emitted]) -> usize {
    // The exporter's default gzip level.
    let level = CompressionParams::default()
        .level_for(Compression::Gzip)
        .expect("the default level is in range");
    emitted
        .iter()
        .map(|e| {
            // As the exporter serializes merged chunks (persist).
            let mut json = Vec::new();
            e.chunk.write_json(&mut json);
            let env = Envelope::for_chunk_json(json, &e.chunk.platform, "profilink", "bench");
            // As the Sentry sink compresses it: streamed into gzip, never copied whole.
            compress_written(Compression::Gzip, level, env.size_hint(), |mut w| {
                env.write_to(&mut w)
            })
            .expect("in-memory gzip")
            .len()
        })
        .sum()
}

fn median_us(mut f: impl FnMut(), n: usize) -> f64 {
    let mut v: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bench(c: &mut Criterion) {
    let fixture = fixture();
    let opts = ChunkOptions::default();
    let reqs: Vec<_> = (0..ROUNDS).map(|r| request(&fixture, r)).collect();
    let gz = load_request::gzip(&reqs[0].encode_to_vec());
    let observations: u64 = reqs[0]
        .resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles)
        .flat_map(|p| &p.samples)
        .map(|s| s.timestamps_unix_nano.len().max(1) as u64)
        .sum();
    let translated: Vec<_> = reqs
        .iter()
        .map(|r| routed(request_to_chunks(r, &opts).chunks))
        .collect();
    // Each round's input records (their bytes on disk, below) and chunk infos, encoded once.
    let (record_bytes, rounds): (Vec<usize>, Vec<Round>) = translated
        .iter()
        .map(|items| {
            let (records, infos) = testing::encode_batch(items);
            let bytes: usize = records.iter().map(|r| r.body.len()).sum();
            (bytes, (items.clone(), infos))
        })
        .unzip();
    let emitted = merge(&rounds);
    eprintln!(
        "request: {} resources, {observations} observations, {} chunks from translation; \
         12 rounds merge into {} chunks",
        reqs[0].resource_profiles.len(),
        translated[0].len(),
        emitted.len()
    );

    // What the queue holds per observation: an input record on disk (what it is charged), its
    // parts' JSON (the charge before issue #44), and what the merged chunks take once persisted.
    let n = (observations * ROUNDS as u64) as f64;
    let records: usize = record_bytes.iter().sum();
    let parts_json: u64 = rounds
        .iter()
        .flat_map(|(_, infos)| infos)
        .map(|i| i.approx_bytes)
        .sum();
    let merged: usize = emitted
        .iter()
        .map(|e| {
            let mut json = Vec::new();
            e.chunk.write_json(&mut json);
            json.len()
        })
        .sum();
    eprintln!(
        "bytes per observation: input record {:.1} on disk, its parts' JSON {:.1}; merged chunk JSON {:.1}",
        records as f64 / n,
        parts_json as f64 / n,
        merged as f64 / n
    );

    let mut g = c.benchmark_group("request_path");
    g.throughput(Throughput::Elements(observations));
    g.sample_size(20);
    g.bench_function("decode", |b| b.iter(|| decode(black_box(&gz))));
    g.bench_function("translate", |b| {
        b.iter(|| request_to_chunks(black_box(&reqs[0]), &opts))
    });
    g.bench_function("queue_encode", |b| {
        b.iter(|| testing::encode_batch(black_box(&translated[0])))
    });
    g.throughput(Throughput::Elements(observations * ROUNDS as u64));
    g.bench_function("merge_12_rounds", |b| {
        b.iter_batched(|| (), |_| merge(black_box(&rounds)), BatchSize::SmallInput)
    });
    g.bench_function("deliver_12_rounds", |b| {
        b.iter(|| deliver(black_box(&emitted)))
    });
    g.finish();

    // Summary: medians per request, interleaved so every stage sees the same machine load.
    let n = 15;
    let stages: [(&str, f64); 5] = [
        ("decode", median_us(|| drop(decode(&gz)), n)),
        (
            "translate",
            median_us(|| drop(request_to_chunks(&reqs[0], &opts)), n),
        ),
        (
            "queue_encode",
            median_us(|| drop(testing::encode_batch(&translated[0])), n),
        ),
        (
            "merge",
            median_us(|| drop(merge(&rounds)), n) / ROUNDS as f64,
        ),
        (
            "deliver",
            median_us(|| _ = deliver(&emitted), n) / ROUNDS as f64,
        ),
    ];
    let total: f64 = stages.iter().map(|s| s.1).sum();
    let shares: Vec<String> = stages
        .iter()
        .map(|(name, us)| format!("{name} {us:.0} us ({:.0}%)", us / total * 100.0))
        .collect();
    eprintln!(
        "per request: {} = {total:.0} us; {observations} observations -> at most {:.0} samples/s per core",
        shares.join(", "),
        observations as f64 / total * 1e6
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
