//! `to_chunks_with` hands out exactly the chunks `to_chunks` returns, in the same order, and
//! the same links, rejections and counters: on every OTLP fixture (under both sparse-thread
//! policies) and on round-tripped Sentry chunks (the restore path).

mod otlp_to_sentry_support;

use otlp_to_sentry_support::otlp_fixtures;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_translator::NoLinks;
use profilink_translator::otlp_to_sentry::{
    ChunkOptions, ChunkTranslation, SparseThreadPolicy, to_chunks, to_chunks_with,
};
use profilink_translator::sentry_to_otlp::{self, SentryInput};

const SENTRY_FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/sentry/python"
);

/// The streamed chunks (in emission order) and the rest of the translation.
fn streamed(
    req: &ExportProfilesServiceRequest,
    opts: &ChunkOptions,
) -> (Vec<ProfileChunk>, ChunkTranslation) {
    let mut chunks = Vec::new();
    let rest = to_chunks_with(
        req.dictionary.as_ref(),
        &req.resource_profiles,
        opts,
        &mut |c| chunks.push(c),
    );
    (chunks, rest)
}

fn assert_streams_like_translate(
    name: &str,
    req: &ExportProfilesServiceRequest,
    opts: &ChunkOptions,
) {
    let whole = to_chunks(req.dictionary.as_ref(), &req.resource_profiles, opts);
    let (chunks, rest) = streamed(req, opts);
    assert!(!whole.chunks.is_empty(), "{name}: no chunks");
    assert!(rest.chunks.is_empty(), "{name}: to_chunks_with kept chunks");
    assert_eq!(chunks.len(), whole.chunks.len(), "{name}: chunk count");
    for (i, (s, w)) in chunks.iter().zip(&whole.chunks).enumerate() {
        assert_eq!(s, w, "{name}: chunk {i} differs");
        assert_eq!(s.to_json(), w.to_json(), "{name}: chunk {i} bytes differ");
    }
    assert_eq!(rest.links, whole.links, "{name}: links");
    assert_eq!(rest.rejected, whole.rejected, "{name}: rejected");
    assert_eq!(rest.stats, whole.stats, "{name}: stats");
    assert_eq!(
        rest.stats.chunks as usize,
        chunks.len(),
        "{name}: chunks counted"
    );
}

#[test]
fn streaming_emits_what_translate_returns_on_every_fixture() {
    for (name, req) in otlp_fixtures() {
        for policy in [SparseThreadPolicy::Keep, SparseThreadPolicy::Drop] {
            let opts = ChunkOptions {
                sparse_thread_policy: policy,
                ..ChunkOptions::default()
            };
            assert_streams_like_translate(&format!("{name} ({policy:?})"), &req, &opts);
        }
    }
}

#[test]
fn small_chunks_stream_in_the_same_order() {
    // Many chunks per session and several sessions: the order of emission is the order of
    // `ChunkTranslation::chunks`.
    let opts = ChunkOptions {
        max_chunk_duration_ns: 1_000_000_000,
        ..ChunkOptions::default()
    };
    for (name, req) in otlp_fixtures() {
        assert_streams_like_translate(&format!("{name} (1 s chunks)"), &req, &opts);
    }
}

#[test]
fn restored_round_trip_chunks_go_through_the_callback() {
    let chunks: Vec<ProfileChunk> = ["trace-chunk-00.envelope", "trace-chunk-01.envelope"]
        .iter()
        .map(|name| {
            let bytes = std::fs::read(format!("{SENTRY_FIXTURES}/{name}")).unwrap();
            let env = Envelope::parse(&bytes).unwrap();
            let item = env.items.iter().find(|i| i.is_profile_chunk()).unwrap();
            ProfileChunk::from_json(&item.payload).unwrap()
        })
        .collect();
    let input = SentryInput {
        chunks: &chunks,
        v1_profiles: &[],
    };
    let req =
        sentry_to_otlp::try_to_otlp(&input, &NoLinks, &sentry_to_otlp::OtlpOptions::default())
            .unwrap();
    let opts = ChunkOptions::default();
    let (streamed_chunks, rest) = streamed(&req, &opts);
    assert_eq!(rest.stats.profiles_restored, 2);
    assert_eq!(streamed_chunks.len(), 2);
    assert_streams_like_translate("round trip", &req, &opts);
}
