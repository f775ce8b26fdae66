//! A V2 profile chunk → one OTLP `Profile`.
//!
//! * `sample_type` = `samples`/`count`, `period_type` = `cpu`/`nanoseconds`, `period` from
//!   [`super::OtlpOptions`]; `profile_id` = the 16 bytes of `chunk_id` (empty when `chunk_id` is not
//!   a 32-hex/UUID id or is all zeros).
//! * Sample times: `secs_to_nanos(timestamp)`, the decimal digits the SDK wrote, so
//!   `nanos_to_secs` gives back the same `f64` (exact for every timestamp with at most 9
//!   fractional digits in its shortest form, i.e. every SDK-written one).
//! * Profile attributes: [`PROFILINK_FORMAT`] = [`PROFILINK_FORMAT_CHUNK_V1`] (the mark that
//!   lets the OTLP -> Sentry direction restore the chunk), [`SENTRY_CHUNK_ID`], [`SENTRY_VERSION`], [`SENTRY_CONTENT_TYPE`] (when
//!   set) and the extras of [`super::extras`].
//! * Before anything is interned, the chunk is checked (so a rejected chunk leaves nothing in
//!   the shared dictionary): every timestamp finite, non-negative and before year 2540; every
//!   `stack_id` in range; every frame index of every stack in range (as Relay checks).

use super::attributes::{
    PROFILINK_FORMAT, PROFILINK_FORMAT_CHUNK_V1, SENTRY_CHUNK_ID, SENTRY_CONTENT_TYPE,
    SENTRY_VERSION,
};
use super::builder::DictionaryBuilder;
use super::options::OtlpOptions;
use super::samples::{Body, emit};
use super::{extras, profile_shell};
use crate::error::{TimestampError, TranslateError};
use crate::linking::LinkSource;
use profilink_proto::otlp::Profile;
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::sentry::secs_to_nanos;

/// Checks stack and frame indices of a profile body.
pub(crate) fn check_stacks(stacks: &[Vec<usize>], frames: usize) -> Result<(), TranslateError> {
    for stack in stacks {
        for &f in stack {
            if f >= frames {
                return Err(TranslateError::SentryIndexOutOfRange {
                    what: "frame index",
                    index: f,
                    len: frames,
                });
            }
        }
    }
    Ok(())
}

/// Checks a chunk and converts its sample times to Unix nanoseconds.
pub fn prepare(chunk: &ProfileChunk) -> Result<Vec<u64>, TranslateError> {
    let p = &chunk.profile;
    check_stacks(&p.stacks, p.frames.len())?;
    let mut out = Vec::with_capacity(p.samples.len());
    // SDKs sample every thread at the same instant: convert each distinct run of equal
    // timestamps once (the conversion formats the f64's shortest decimal, the costly part).
    let mut last: Option<(u64, u64)> = None;
    for (i, s) in p.samples.iter().enumerate() {
        if s.stack_id >= p.stacks.len() {
            return Err(TranslateError::SentryIndexOutOfRange {
                what: "stack_id",
                index: s.stack_id,
                len: p.stacks.len(),
            });
        }
        let bits = s.timestamp.to_bits();
        let ns = match last {
            Some((b, ns)) if b == bits => ns,
            _ => {
                let ns = secs_to_nanos(s.timestamp).ok_or(TimestampError::Sample {
                    index: i,
                    timestamp: s.timestamp,
                })?;
                last = Some((bits, ns));
                ns
            }
        };
        out.push(ns);
    }
    Ok(out)
}

/// Translates a chunk checked by [`prepare`] (`times` is its result).
pub(crate) fn to_profile(
    b: &mut DictionaryBuilder,
    chunk: &ProfileChunk,
    times: &[u64],
    links: &dyn LinkSource,
    options: &OtlpOptions,
) -> Profile {
    let p = &chunk.profile;
    let images = chunk.debug_meta.as_ref().map_or(&[][..], |d| &d.images[..]);
    let body = Body {
        frames: &p.frames,
        stacks: &p.stacks,
        thread_metadata: &p.thread_metadata,
        platform: &chunk.platform,
        images,
    };
    let observations = p
        .samples
        .iter()
        .zip(times)
        .map(|(s, &t)| (t, s.stack_id, s.thread_id.as_str()));
    let emitted = emit(
        b,
        &body,
        observations,
        times.len(),
        links,
        &chunk.profiler_id,
        options,
    );

    let mut attrs = vec![
        b.attribute_str(PROFILINK_FORMAT, PROFILINK_FORMAT_CHUNK_V1),
        b.attribute_str(SENTRY_CHUNK_ID, &chunk.chunk_id),
        b.attribute_str(SENTRY_VERSION, &chunk.version),
    ];
    if let Some(ct) = &chunk.content_type {
        attrs.push(b.attribute_str(SENTRY_CONTENT_TYPE, ct));
    }
    extras::encode(b, &mut attrs, &p.thread_metadata, chunk.debug_meta.as_ref());
    extras::encode_measurements(b, &mut attrs, &chunk.measurements);
    profile_shell(b, emitted, &chunk.chunk_id, attrs)
}
