//! OTLP -> chunk -> OTLP on the real OTLP fixtures: observations (thread, time to the
//! microsecond, stack as function names or addresses), and trace links, survive the trip.

mod otlp_to_sentry_support;

use otlp_to_sentry_support::{Obs, assert_same_observations, expected_observations};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use profilink_translator::Dictionary;
use profilink_translator::ExactLinks;
use profilink_translator::otlp_to_sentry::{
    self, ChunkOptions, SparseThreadGrouping, SparseThreadPolicy,
};
use profilink_translator::sentry_to_otlp::{self, SentryInput};
use profilink_translator::sentry_to_otlp::{canonical_form, restore_request};
use prost::Message;

fn fixtures() -> Vec<(String, ExportProfilesServiceRequest)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/otlp");
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pb"))
        .map(|p| {
            let req = ExportProfilesServiceRequest::decode(std::fs::read(&p).unwrap().as_slice())
                .unwrap();
            (p.display().to_string(), req)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 4);
    out
}

/// (thread id, trace id, span id, time in ns) of every linked observation, sorted.
fn links(req: &ExportProfilesServiceRequest) -> Vec<(String, Vec<u8>, Vec<u8>, u64)> {
    let dict = Dictionary::new(req.dictionary.as_ref());
    let mut out = Vec::new();
    for p in req
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
    {
        for s in &p.samples {
            let Some(link) = dict.link(s.link_index).unwrap() else {
                continue;
            };
            let thread = dict
                .attributes(&s.attribute_indices)
                .unwrap()
                .iter()
                .find(|a| a.key == "thread.id")
                .and_then(|a| a.value.to_text())
                .unwrap_or_default();
            for &ts in &s.timestamps_unix_nano {
                out.push((
                    thread.clone(),
                    link.trace_id.clone(),
                    link.span_id.clone(),
                    ts,
                ));
            }
        }
    }
    out.sort();
    out
}

/// Asserts the same links on the same observations, times to the microsecond.
fn assert_same_links(
    name: &str,
    before: &ExportProfilesServiceRequest,
    after: &ExportProfilesServiceRequest,
) {
    let (l0, l1) = (links(before), links(after));
    assert_eq!(l0.len(), l1.len(), "{name}: linked observations");
    for (a, b) in l0.iter().zip(&l1) {
        assert_eq!((&a.0, &a.1, &a.2), (&b.0, &b.1, &b.2), "{name}: link");
        assert!(
            a.3.abs_diff(b.3) <= 1_000,
            "{name}: link time {} vs {}",
            a.3,
            b.3
        );
    }
}

#[test]
fn observations_frames_and_links_survive_otlp_to_chunks_to_otlp() {
    // Threads as they are (no grouping): the translation is then exact, thread ids included.
    let opts = ChunkOptions {
        sparse_thread_grouping: SparseThreadGrouping::None,
        sparse_thread_policy: SparseThreadPolicy::Keep,
        ..Default::default()
    };
    for (name, req) in fixtures() {
        let there = otlp_to_sentry::request_to_chunks(&req, &opts);
        assert!(there.rejected.is_empty(), "{name}: {:?}", there.rejected);
        let input = SentryInput {
            chunks: &there.chunks,
            v1_profiles: &[],
        };
        let back = sentry_to_otlp::to_otlp(
            &input,
            &ExactLinks::new(&there.links),
            &sentry_to_otlp::OtlpOptions::default(),
        );
        assert!(back.rejected.is_empty(), "{name}: {:?}", back.rejected);
        let before: Vec<Obs> = expected_observations(&req, opts.max_stack_depth);
        let after: Vec<Obs> = expected_observations(&back.request, usize::MAX);
        assert!(!before.is_empty(), "{name}");
        assert_same_observations(after, before);
        assert_same_links(&name, &req, &back.request);
        // The OTLP made from profilink's chunks (ELF addresses, slot bases kept) restores them
        // exactly.
        let restored: Vec<ProfileChunk> = restore_request(&back.request)
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
        let key = |c: &ProfileChunk| c.chunk_id.clone();
        let mut want: Vec<ProfileChunk> = there.chunks.iter().map(canonical_form).collect();
        let mut got: Vec<ProfileChunk> = restored.iter().map(canonical_form).collect();
        want.sort_by_key(key);
        got.sort_by_key(key);
        assert!(got == want, "{name}: restored chunks differ");
    }
}

#[test]
fn links_on_arbitrary_nanosecond_timestamps_survive() {
    // eBPF timestamps are arbitrary nanoseconds, finer than f64 seconds can hold; a link must
    // still re-attach to its sample after the trip through a chunk.
    let (name, mut req) = fixtures()
        .into_iter()
        .find(|(n, _)| n.ends_with("ebpf-profile.pb"))
        .unwrap();
    let dict = req.dictionary.as_mut().unwrap();
    dict.link_table.push(profilink_proto::otlp::Link {
        trace_id: vec![0xab; 16],
        span_id: vec![0xcd; 8],
    });
    let link = (dict.link_table.len() - 1) as i32;
    let mut linked = 0;
    for p in req
        .resource_profiles
        .iter_mut()
        .flat_map(|r| &mut r.scope_profiles)
        .flat_map(|s| &mut s.profiles)
    {
        for s in p.samples.iter_mut().step_by(2) {
            s.link_index = link;
            linked += s.timestamps_unix_nano.len();
        }
    }
    assert!(linked > 10, "{name}");
    let opts = ChunkOptions::default();
    let there = otlp_to_sentry::request_to_chunks(&req, &opts);
    let input = SentryInput {
        chunks: &there.chunks,
        v1_profiles: &[],
    };
    let back = sentry_to_otlp::to_otlp(
        &input,
        &ExactLinks::new(&there.links),
        &sentry_to_otlp::OtlpOptions::default(),
    );
    assert_eq!(links(&back.request).len(), linked);
    assert_same_links(&name, &req, &back.request);
}
