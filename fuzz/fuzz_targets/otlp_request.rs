//! OTLP protobuf request -> dictionary validation -> `otlp_to_sentry::request_to_chunks` ->
//! chunk JSON. Every chunk written must read back as a chunk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::validate::{validate_dictionary, validate_otlp};
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
    let Ok(req) = ExportProfilesServiceRequest::decode(data) else {
        return;
    };
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
