//! Delivery latency: from the acknowledgement of the request that completed a chunk (the
//! round after its last) to the stand-in receiving the chunk, over the sampled envelopes (and
//! those envelopes' chunks, decoded).

use crate::{ROUND_NS, ROUNDS_PER_CHUNK};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_translator::otlp_to_sentry::{ChunkOptions, to_chunks};
use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Which client (index of its request template) owns each profiler session.
pub fn owners(templates: &[ExportProfilesServiceRequest]) -> HashMap<String, usize> {
    let mut owner = HashMap::new();
    for (c, t) in templates.iter().enumerate() {
        for ch in to_chunks(
            t.dictionary.as_ref(),
            &t.resource_profiles,
            &ChunkOptions::default(),
        )
        .chunks
        {
            owner.insert(ch.profiler_id, c);
        }
    }
    owner
}

/// The profile chunks of a sampled envelope body compressed with `compression` (none when it
/// does not decode).
pub fn chunks(body: &[u8], compression: &str) -> Vec<ProfileChunk> {
    let mut raw = Vec::new();
    let decoded = match compression {
        "zstd" => zstd::stream::read::Decoder::new(body).and_then(|mut d| d.read_to_end(&mut raw)),
        "gzip" => flate2::read::GzDecoder::new(body).read_to_end(&mut raw),
        _ => {
            raw.extend_from_slice(body);
            Ok(raw.len())
        }
    };
    if decoded.is_err() {
        return Vec::new();
    }
    let Ok(env) = Envelope::parse(&raw) else {
        return Vec::new();
    };
    env.profile_chunks()
        .filter_map(|item| ProfileChunk::from_json(&item.payload).ok())
        .collect()
}

/// Seconds from the closing round's acknowledgement to the arrival, for each chunk of the
/// `sampled` envelopes (arrival time, body compressed with `compression`) whose session has an
/// owner and whose closing round was acknowledged (`acks[client][round]`, ns since the start;
/// 0 when not). `base` is the fixture's first sample time (round 0).
pub fn latencies(
    sampled: &[(f64, Vec<u8>)],
    compression: &str,
    owner: &HashMap<String, usize>,
    base: u64,
    acks: &[Arc<Vec<AtomicU64>>],
) -> Vec<f64> {
    let mut delivery = Vec::new();
    for (t, body) in sampled {
        for chunk in chunks(body, compression) {
            let (Some(&c), Some(first)) =
                (owner.get(&chunk.profiler_id), chunk.profile.samples.first())
            else {
                continue;
            };
            let first_ns = (first.timestamp * 1e9) as u64;
            let r0 = (first_ns.saturating_sub(base) + ROUND_NS / 2) / ROUND_NS;
            let closing = r0 as usize + ROUNDS_PER_CHUNK;
            if let Some(ack) = acks[c].get(closing) {
                let ack = ack.load(Ordering::Relaxed);
                if ack > 0 {
                    delivery.push(t - ack as f64 / 1e9);
                }
            }
        }
    }
    delivery
}
