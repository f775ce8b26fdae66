//! OTLP protobuf request -> lenient decoding (`wire::decode_profiles_request`: invalid UTF-8
//! repair, proto 1.9 layout detection) -> dictionary validation ->
//! `otlp_to_sentry::request_to_chunks` -> chunk JSON. Every chunk written must read back as a
//! chunk. Layout detection on random bytes: a request prost decodes consistently is read as
//! prost reads it; whatever is accepted re-encodes to valid 1.10 that decodes as itself; a
//! request read as 1.9 is consistent and its own 1.9 encoding is never refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::validate::{validate_dictionary, validate_otlp};
use profilink_proto::wire::{SampleLayout, consistency, decode_profiles_request, v1_9};
use profilink_translator::otlp_to_sentry::{ChunkOptions, request_to_chunks};
use prost::Message;

/// The translation options: the default but for a smaller expansion cap. At the default 1 M a
/// small request with large aggregated values costs 7-8 s here (1 M observations under
/// coverage instrumentation); 46 such inputs of a 1,842-input corpus held the runs to about
/// 110 executions/s. The scaling to the cap is the same code at any cap, and real eBPF
/// requests carry timestamps, which the cap does not touch.
fn options() -> ChunkOptions {
    ChunkOptions {
        max_expanded_samples: 1_000,
        ..ChunkOptions::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let strict = ExportProfilesServiceRequest::decode(data);
    let Ok((req, report)) = decode_profiles_request(data) else {
        // Refused: prost's reading, if any, was not consistent.
        if let Ok(r) = &strict {
            assert!(consistency(r).is_err(), "a consistent request was refused");
        }
        return;
    };
    if let Ok(r) = &strict
        && consistency(r).is_ok()
    {
        assert_eq!(&req, r, "a consistent 1.10 request was read otherwise");
    }
    let again = ExportProfilesServiceRequest::decode(req.encode_to_vec().as_slice())
        .expect("an accepted request re-encodes as valid 1.10");
    assert_eq!(again, req);
    if report.layout == SampleLayout::V1_9 {
        assert!(consistency(&req).is_ok(), "an inconsistent 1.9 reading was used");
        // Its own 1.9 encoding is never refused.
        assert!(decode_profiles_request(&v1_9::encode(&req)).is_ok());
    }
    let _ = validate_dictionary(req.dictionary.as_ref());
    let _ = validate_otlp(req.dictionary.as_ref(), &req.resource_profiles);
    let t = request_to_chunks(&req, &options());
    // At most 1000 chunks are read back (see target `otlp_structured`).
    for chunk in t.chunks.iter().take(1000) {
        let json = chunk.to_json();
        if let Err(e) = ProfileChunk::from_json(&json) {
            panic!("a translated chunk does not read back: {e:?}");
        }
    }
});
