//! Decode time of a binary OTLP profiles request on the real eBPF fixture
//! (`tests/fixtures/otlp/ebpf-profile.pb`): prost's strict decode, which every path used before
//! lenient decoding existed, and [`decode_profiles_request`], which every path uses now (strict
//! first; invalid UTF-8 repair and layout detection only when that fails or reads
//! inconsistently). The two must stay within 5% of each other on this valid input.

use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::wire::decode_profiles_request;
use prost::Message;

fn fixture() -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/otlp/ebpf-profile.pb");
    std::fs::read(path).expect("the eBPF fixture (tests/fixtures/otlp)")
}

fn decode(c: &mut Criterion) {
    let bytes = fixture();
    let mut g = c.benchmark_group("decode_ebpf_fixture");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("prost_strict", |b| {
        b.iter(|| ExportProfilesServiceRequest::decode(black_box(bytes.as_slice())).unwrap())
    });
    g.bench_function("lenient", |b| {
        b.iter(|| decode_profiles_request(black_box(bytes.as_slice())).unwrap())
    });
    g.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
