//! Chunk JSON -> OTLP -> chunk (restore): for a chunk the project's validator accepts (no
//! error findings) and `sentry_to_otlp` translates, the restored chunk equals the input in
//! canonical form, the OTLP request has no validation errors, and the restored chunk's JSON
//! reads back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::validate::{has_errors, validate_chunk, validate_otlp};
use profilink_translator::NoLinks;
use profilink_translator::sentry_to_otlp::{OtlpOptions, SentryInput, to_otlp};
use profilink_translator::sentry_to_otlp::{canonical_form, restore_request};

fuzz_target!(|data: &[u8]| {
    let Ok(chunk) = ProfileChunk::from_json(data) else {
        return;
    };
    if has_errors(&validate_chunk(&chunk)) {
        return;
    }
    let chunks = [chunk];
    let t = to_otlp(
        &SentryInput {
            chunks: &chunks,
            v1_profiles: &[],
        },
        &NoLinks,
        &OtlpOptions::default(),
    );
    if !t.rejected.is_empty() {
        return;
    }
    let findings = validate_otlp(t.request.dictionary.as_ref(), &t.request.resource_profiles);
    assert!(
        !has_errors(&findings),
        "translated request is invalid: {findings:#?}"
    );
    let restored = restore_request(&t.request);
    assert_eq!(
        restored.len(),
        1,
        "one chunk in, {} restored",
        restored.len()
    );
    let back = match restored.into_iter().next() {
        Some(Ok(c)) => c,
        Some(Err(e)) => panic!("restore failed: {e}"),
        None => unreachable!(),
    };
    assert_eq!(
        canonical_form(&back),
        canonical_form(&chunks[0]),
        "round trip changed the chunk"
    );
    ProfileChunk::from_json(&back.to_json()).expect("restored chunk JSON reads back");
});
