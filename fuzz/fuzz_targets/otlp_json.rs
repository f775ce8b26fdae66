//! OTLP/JSON decode (profiles and traces; requests and data) -> encode -> decode: the second
//! decode equals the first (compared as protobuf bytes, so NaN values compare too).
#![no_main]

use libfuzzer_sys::fuzz_target;
use profilink_proto::otlp_json;
use prost::Message;

fn check<T: Message + Default>(
    data: &[u8],
    decode: fn(&[u8]) -> Result<T, otlp_json::OtlpJsonError>,
    encode: fn(&T) -> Vec<u8>,
    what: &str,
) {
    let Ok(first) = decode(data) else { return };
    let json = encode(&first);
    let second = match decode(&json) {
        Ok(s) => s,
        Err(e) => panic!("{what}: own output does not decode: {e}"),
    };
    assert_eq!(
        first.encode_to_vec(),
        second.encode_to_vec(),
        "{what}: decode(encode(x)) != x"
    );
}

fuzz_target!(|data: &[u8]| {
    check(
        data,
        otlp_json::decode_request,
        otlp_json::encode_request,
        "profiles request",
    );
    check(
        data,
        otlp_json::decode_profiles_data,
        otlp_json::encode_profiles_data,
        "profiles data",
    );
    check(
        data,
        otlp_json::decode_traces_request,
        otlp_json::encode_traces_request,
        "traces request",
    );
    check(
        data,
        otlp_json::decode_traces_data,
        otlp_json::encode_traces_data,
        "traces data",
    );
});
