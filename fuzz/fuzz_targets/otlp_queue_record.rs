//! The OTLP exporters' durable sending queue records (`version | kind | items | protobuf`),
//! profiles (`P`) and traces (`T`).
//!
//! The first byte picks the mode: even, the rest is a raw record given to both decoders (none
//! may panic); odd, the rest is an OTLP request (profiles when bit 1 is clear, else traces)
//! that, when it decodes, is encoded as a record, decoded back (equal request, same item count,
//! refused by the other signal's decoder), then corrupted at one byte (position and value from
//! the first byte) and truncated there, and decoded again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profilink_exporter::testing::{Queued, decode_otlp_record, encode_otlp_record};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::otlp::ExportTraceServiceRequest;

fn decode_all(record: &[u8]) {
    let _ = decode_otlp_record::<ExportProfilesServiceRequest>(record);
    let _ = decode_otlp_record::<ExportTraceServiceRequest>(record);
}

fn round_trip<T: Queued, U: Queued>(mode: u8, wire: &[u8]) {
    let Ok(request) = T::decode(wire) else {
        return;
    };
    let items = u64::from(mode) * 0x0101_0101;
    let record = encode_otlp_record(&request, items);
    let (back, n) = decode_otlp_record::<T>(&record).expect("own record decodes");
    assert_eq!(n, items, "item count changed");
    // Compared as protobuf bytes: a NaN double (an attribute value) is not equal to itself.
    assert_eq!(
        back.encode_to_vec(),
        request.encode_to_vec(),
        "record changed the request"
    );
    assert!(
        decode_otlp_record::<U>(&record).is_err(),
        "another signal's decoder took the record"
    );
    let mut corrupt = record.clone();
    let at = usize::from(mode >> 2) * corrupt.len() / 64;
    if let Some(b) = corrupt.get_mut(at) {
        *b ^= mode | 1;
    }
    decode_all(&corrupt);
    corrupt.truncate(at);
    decode_all(&corrupt);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        decode_all(rest);
    } else if mode & 2 == 0 {
        round_trip::<ExportProfilesServiceRequest, ExportTraceServiceRequest>(mode, rest);
    } else {
        round_trip::<ExportTraceServiceRequest, ExportProfilesServiceRequest>(mode, rest);
    }
});
