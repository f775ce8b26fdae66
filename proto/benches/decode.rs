//! Decode time of a binary OTLP profiles request on the real eBPF fixture
//! (`tests/fixtures/otlp/ebpf-profile.pb`): prost's strict decode, which every path used before
//! lenient decoding existed, and [`decode_profiles_request`], which every path uses now (strict
//! first; invalid UTF-8 repair and layout detection only when that fails or reads
//! inconsistently). The two must stay within 5% of each other on this valid input.
//!
//! On a shared machine the load drifts between criterion's two runs, so `paired` also times
//! them interleaved (rounds of 20 decodes of each, alternating, 300 rounds) and prints both
//! medians and their ratio: `paired: strict 170.1 us, lenient 171.0 us, ratio 1.005`.

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

/// Interleaved rounds of both decoders: medians per decode and their ratio.
fn paired(_c: &mut Criterion) {
    use std::time::Instant;
    let bytes = fixture();
    let round = |f: &dyn Fn()| {
        let t = Instant::now();
        for _ in 0..20 {
            f();
        }
        t.elapsed().as_secs_f64() / 20.0
    };
    let strict = || {
        black_box(ExportProfilesServiceRequest::decode(black_box(bytes.as_slice())).unwrap());
    };
    let lenient = || {
        black_box(decode_profiles_request(black_box(bytes.as_slice())).unwrap());
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..300 {
        if i % 2 == 0 {
            a.push(round(&strict));
            b.push(round(&lenient));
        } else {
            b.push(round(&lenient));
            a.push(round(&strict));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (ma, mb) = (median(&mut a), median(&mut b));
    println!(
        "paired: strict {:.1} us, lenient {:.1} us, ratio {:.3}",
        ma * 1e6,
        mb * 1e6,
        mb / ma
    );
}

criterion_group!(benches, decode, paired);
criterion_main!(benches);
