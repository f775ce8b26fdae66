//! The durable queue's records: input records (binary batch format, versions 1 and 2, and
//! legacy `route length | route | chunk JSON`), consumption records and ready-record metadata.
//!
//! The first byte picks the mode: even, the rest is a raw record body given to every decoder
//! (none may panic); odd, the rest is chunk JSON that is encoded as a batch record and as a
//! legacy record, decoded back (equal chunk JSON, exact size estimate), then one byte of the
//! record is corrupted (position and value from the first byte) and decoded again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profilink_exporter::testing::{
    decode_consumed, decode_input as decode, decode_ready, encode_batch, encode_legacy,
};
use profilink_proto::sentry::ProfileChunk;

fn decode_all(body: &[u8]) {
    if let Ok(parts) = decode(body) {
        for p in &parts {
            let _ = p.chunk.to_json();
        }
    }
    let _ = decode_consumed(body);
    let _ = decode_ready(1, body);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        decode_all(rest);
        return;
    }
    let Ok(chunk) = ProfileChunk::from_json(rest) else {
        return;
    };
    let json = chunk.to_json();
    let route = if mode & 2 == 0 { "" } else { "route-b" };
    let items = vec![(route.to_string(), chunk.clone())];
    let (records, infos) = encode_batch(&items);
    assert_eq!(
        infos[0].approx_bytes as usize,
        json.len(),
        "size estimate is not exact"
    );
    for record in &records {
        let decoded = decode(&record.body).expect("own batch record decodes");
        assert_eq!(decoded.len(), 1);
        assert_eq!(decoded[0].route, route);
        assert_eq!(
            decoded[0].chunk.to_json(),
            json,
            "batch record changed the chunk"
        );
        let mut corrupt = record.body.clone();
        let at = usize::from(mode >> 2) * corrupt.len() / 64;
        if let Some(b) = corrupt.get_mut(at) {
            *b ^= mode | 1;
        }
        decode_all(&corrupt);
        corrupt.truncate(at);
        decode_all(&corrupt);
    }
    let legacy = encode_legacy(route, &chunk);
    let decoded = decode(&legacy).expect("own legacy record decodes");
    assert_eq!(
        decoded[0].chunk.to_json(),
        json,
        "legacy record changed the chunk"
    );
});
