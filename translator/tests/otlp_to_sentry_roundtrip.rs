//! Sentry chunk -> OTLP -> Sentry chunk: profiles marked `sentry.chunk_id` are restored exactly.

use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_translator::otlp_to_sentry::{ChunkOptions, request_to_chunks};
use profilink_translator::sentry_to_otlp::canonical_form;
use profilink_translator::sentry_to_otlp::{self, SentryInput};
use profilink_translator::{ExactLinks, NoLinks};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/sentry/python"
);

fn fixture_chunks() -> Vec<ProfileChunk> {
    ["trace-chunk-00.envelope", "trace-chunk-01.envelope"]
        .iter()
        .map(|name| {
            let bytes = std::fs::read(format!("{FIXTURES}/{name}")).unwrap();
            let env = Envelope::parse(&bytes).unwrap();
            let item = env.items.iter().find(|i| i.is_profile_chunk()).unwrap();
            ProfileChunk::from_json(&item.payload).unwrap()
        })
        .collect()
}

#[test]
fn sentry_chunks_round_trip_through_otlp() {
    let chunks = fixture_chunks();
    let input = SentryInput {
        chunks: &chunks,
        v1_profiles: &[],
    };
    let req =
        sentry_to_otlp::try_to_otlp(&input, &NoLinks, &sentry_to_otlp::OtlpOptions::default())
            .unwrap();
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert!(t.rejected.is_empty(), "{:?}", t.rejected);
    assert_eq!(t.stats.profiles_restored, 2);
    assert_eq!(t.chunks.len(), 2);
    for (orig, back) in chunks.iter().zip(&t.chunks) {
        assert_eq!(canonical_form(back), canonical_form(orig));
    }
}

#[test]
fn restored_chunks_keep_their_links() {
    let chunks = fixture_chunks();
    let c = &chunks[0];
    // Link every observation of the first thread to one span.
    let tid = c.profile.samples[0].thread_id.clone();
    let links: Vec<_> = c
        .profile
        .samples
        .iter()
        .filter(|s| s.thread_id == tid)
        .map(|s| profilink_translator::SampleLink {
            profiler_id: c.profiler_id.clone(),
            thread_id: tid.to_string(),
            timestamp_ns: profilink_proto::sentry::secs_to_nanos(s.timestamp).unwrap(),
            trace_id: [7; 16],
            span_id: [9; 8],
        })
        .collect();
    let input = SentryInput {
        chunks: std::slice::from_ref(c),
        v1_profiles: &[],
    };
    let req = sentry_to_otlp::try_to_otlp(
        &input,
        &ExactLinks::new(&links),
        &sentry_to_otlp::OtlpOptions::default(),
    )
    .unwrap();
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert_eq!(t.stats.profiles_restored, 1);
    let mut got = t.links.clone();
    let mut want = links;
    got.sort();
    want.sort();
    assert_eq!(got, want);
}
