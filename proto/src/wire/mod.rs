//! Lenient decoding of binary OTLP profiles requests, as real producers send them.
//!
//! [`decode_profiles_request`] is the one decoder of every binary path (the CLI, OTLP/gRPC,
//! OTLP/HTTP). It tries prost's strict proto 1.10 decode first, which is all a valid request
//! costs; only when that fails, or reads inconsistently, it rewrites the bytes
//! ([`rewrite`]) and decodes again:
//!
//! * **Invalid UTF-8** in any string field (string table, attribute keys, `AnyValue` strings,
//!   scope name/version, schema URLs, entity refs, `original_payload_format`) is replaced with
//!   U+FFFD, one per invalid sequence, as opentelemetry-proto PR #845 asks of decoders; each
//!   replacement is counted ([`DecodeReport::utf8_replacements`], [`counters`]). A Go Collector
//!   copies such strings unchecked, so refusing them would lose whole batches for one byte.
//! * **The proto 1.9 `Sample` layout.** proto 1.10 (opentelemetry-proto #724, 2025-11-20)
//!   renumbered `Sample`: 1.9 has `values = 2, attribute_indices = 3, link_index = 4`, 1.10 has
//!   `attribute_indices = 2, link_index = 3, values = 4` (`stack_index = 1` and
//!   `timestamps_unix_nano = 5` in both; `Profile` is the same in 1.9 and 1.10, 1.8 numbered
//!   its fields 7-12 differently). Producers send no version for it. A 1.9 request either
//!   fails to decode as 1.10 (packed `attribute_indices` at 3 where 1.10 has a varint:
//!   [`LayoutReason::DecodeError`]) or decodes as 1.10 into nonsense: values read as attribute
//!   indices, samples left with neither values nor timestamps, indices past their tables
//!   ([`LayoutReason::Inconsistent`]). Either way the 1.9 reading is tried; it is used when it
//!   decodes and is consistent ([`consistency`]). When neither reading is, the request is
//!   refused, naming both ([`WireDecodeError::NeitherLayout`]): a request is never translated
//!   in the wrong layout. A request whose two readings are the same (no renumbered field
//!   present) is read as 1.10, consistent or not, and validated as usual.
//!
//! Minimum producer versions for proto 1.10 (see the README): the OpenTelemetry Collector
//! v0.148 (pdata with proto 1.10); opentelemetry-ebpf-profiler builds on that pdata;
//! async-profiler after PR #1768. Older ones send 1.9 and are read through the detection.

mod rewrite;
pub mod v1_9;

use crate::otlp::{ExportProfilesServiceRequest, ProfilesDictionary};
use prost::Message;
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

/// The `Sample` field numbering a request was read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SampleLayout {
    /// proto 1.10 and later (`attribute_indices = 2, link_index = 3, values = 4`).
    #[default]
    V1_10,
    /// proto 1.9 and before back to 1.8 (`values = 2, attribute_indices = 3, link_index = 4`).
    V1_9,
}

impl SampleLayout {
    /// `"1.10"` or `"1.9"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SampleLayout::V1_10 => "1.10",
            SampleLayout::V1_9 => "1.9",
        }
    }
}

/// Why a request was read in the proto 1.9 layout (the `reason` label of the metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutReason {
    /// It did not decode as 1.10.
    DecodeError,
    /// It decoded as 1.10, but broke the dictionary's bounds or the samples' shapes.
    Inconsistent,
}

impl LayoutReason {
    /// Every reason, in label order.
    pub const ALL: [LayoutReason; 2] = [LayoutReason::DecodeError, LayoutReason::Inconsistent];

    /// `decode_error` or `inconsistent`.
    pub fn as_str(self) -> &'static str {
        match self {
            LayoutReason::DecodeError => "decode_error",
            LayoutReason::Inconsistent => "inconsistent",
        }
    }
}

/// What lenient decoding did to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodeReport {
    /// Invalid UTF-8 sequences replaced with U+FFFD.
    pub utf8_replacements: u64,
    /// The layout the request was read in.
    pub layout: SampleLayout,
    /// Why it was read in the 1.9 layout (`None` for 1.10).
    pub layout_reason: Option<LayoutReason>,
}

/// A binary request that could not be read in either layout.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireDecodeError {
    /// Not a protobuf message of the profiles schema in either layout.
    #[error("not a binary OTLP profiles message: as proto 1.10: {v1_10}; as proto 1.9: {v1_9}")]
    Undecodable {
        /// prost's error for the 1.10 reading.
        v1_10: String,
        /// The error of the 1.9 reading.
        v1_9: String,
    },
    /// Both layouts decode, and neither is consistent.
    #[error(
        "neither OTLP profiles layout fits the request: as proto 1.10: {v1_10}; as proto 1.9 (Sample values=2, attribute_indices=3, link_index=4): {v1_9}"
    )]
    NeitherLayout {
        /// What is wrong with the 1.10 reading.
        v1_10: String,
        /// What is wrong with the 1.9 reading.
        v1_9: String,
    },
}

/// Process-wide counters of lenient decoding (the binary's `/metrics` reads them).
pub mod counters {
    use super::*;

    pub(super) static UTF8_REPLACEMENTS: AtomicU64 = AtomicU64::new(0);
    pub(super) static LAYOUT_1_9: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
    pub(super) static NEITHER: AtomicU64 = AtomicU64::new(0);

    /// Invalid UTF-8 sequences replaced with U+FFFD, in every request decoded.
    pub fn utf8_replacements() -> u64 {
        UTF8_REPLACEMENTS.load(Ordering::Relaxed)
    }

    /// Requests read in the proto 1.9 layout, by reason.
    pub fn layout_1_9() -> [(LayoutReason, u64); 2] {
        LayoutReason::ALL.map(|r| (r, LAYOUT_1_9[r as usize].load(Ordering::Relaxed)))
    }

    /// Requests refused because neither layout fits.
    pub fn neither_layout() -> u64 {
        NEITHER.load(Ordering::Relaxed)
    }
}

/// Decodes a binary `ExportProfilesServiceRequest` (or `ProfilesData`) leniently (see the
/// module docs), counting what it did in [`counters`].
pub fn decode_profiles_request(
    bytes: &[u8],
) -> Result<(ExportProfilesServiceRequest, DecodeReport), WireDecodeError> {
    let result = decode_uncounted(bytes);
    match &result {
        Ok((_, report)) => {
            if report.utf8_replacements > 0 {
                counters::UTF8_REPLACEMENTS.fetch_add(report.utf8_replacements, Ordering::Relaxed);
            }
            if let Some(r) = report.layout_reason {
                counters::LAYOUT_1_9[r as usize].fetch_add(1, Ordering::Relaxed);
                log_once(r);
            }
        }
        Err(WireDecodeError::NeitherLayout { .. }) => {
            counters::NEITHER.fetch_add(1, Ordering::Relaxed);
        }
        Err(_) => {}
    }
    result
}

/// Logs the first request read in the 1.9 layout for each reason (once per process: the
/// decoder does not know the client; the counters count every request).
fn log_once(reason: LayoutReason) {
    static ONCE: [std::sync::Once; 2] = [std::sync::Once::new(), std::sync::Once::new()];
    ONCE[reason as usize].call_once(|| {
        tracing::warn!(
            reason = reason.as_str(),
            "an OTLP profiles request in the proto 1.9 Sample layout was read as 1.9; upgrade the producer (proto 1.10: Collector v0.148+, async-profiler after #1768); counted in profilink_otlp_decode_layout_1_9_total"
        );
    });
}

/// [`decode_profiles_request`] without the counters.
pub fn decode_uncounted(
    bytes: &[u8],
) -> Result<(ExportProfilesServiceRequest, DecodeReport), WireDecodeError> {
    let strict = ExportProfilesServiceRequest::decode(bytes);
    let strict_error = match strict {
        Ok(request) => match consistency(&request) {
            Ok(()) => return Ok((request, DecodeReport::default())),
            Err(problem) => {
                return inconsistent_1_10(bytes, request, problem);
            }
        },
        Err(e) => e.to_string(),
    };
    // Not strict 1.10: invalid UTF-8, or another layout.
    let repaired = rewrite::rewrite(bytes, SampleLayout::V1_10);
    if let Ok(r) = &repaired
        && r.replacements > 0
        && let Ok(request) = ExportProfilesServiceRequest::decode(r.bytes.as_slice())
    {
        let report = DecodeReport {
            utf8_replacements: r.replacements,
            ..DecodeReport::default()
        };
        return match consistency(&request) {
            Ok(()) => Ok((request, report)),
            Err(problem) => inconsistent_1_10(&r.bytes, request, problem).map(|(req, rep)| {
                (
                    req,
                    DecodeReport {
                        utf8_replacements: r.replacements,
                        ..rep
                    },
                )
            }),
        };
    }
    let old = match rewrite::rewrite(bytes, SampleLayout::V1_9) {
        Ok(r) => r,
        Err(e) => {
            return Err(WireDecodeError::Undecodable {
                v1_10: strict_error,
                v1_9: e.0.to_string(),
            });
        }
    };
    match ExportProfilesServiceRequest::decode(old.bytes.as_slice()) {
        Err(e) => Err(WireDecodeError::Undecodable {
            v1_10: strict_error,
            v1_9: e.to_string(),
        }),
        Ok(request) => match consistency(&request) {
            Ok(()) => Ok((
                request,
                DecodeReport {
                    utf8_replacements: old.replacements,
                    layout: SampleLayout::V1_9,
                    layout_reason: Some(LayoutReason::DecodeError),
                },
            )),
            Err(problem) => Err(WireDecodeError::NeitherLayout {
                v1_10: strict_error,
                v1_9: problem,
            }),
        },
    }
}

/// A 1.10 reading that decoded but is inconsistent: the 1.9 reading when it is consistent;
/// the 1.10 reading when both are the same (nothing renumbered); else refused.
fn inconsistent_1_10(
    bytes: &[u8],
    request: ExportProfilesServiceRequest,
    problem: String,
) -> Result<(ExportProfilesServiceRequest, DecodeReport), WireDecodeError> {
    let old = rewrite::rewrite(bytes, SampleLayout::V1_9);
    let old = match old {
        Ok(r) if r.renumbered == 0 => return Ok((request, DecodeReport::default())),
        Ok(r) => r,
        // Not walkable in the 1.9 layout (1.10 decoded, so this is 1.10): as it is.
        Err(_) => return Ok((request, DecodeReport::default())),
    };
    match ExportProfilesServiceRequest::decode(old.bytes.as_slice()) {
        // 1.10 fields (packed values at 4) do not decode as 1.9: it is 1.10, with bad data.
        Err(_) => Ok((request, DecodeReport::default())),
        Ok(old_request) => match consistency(&old_request) {
            Ok(()) => Ok((
                old_request,
                DecodeReport {
                    utf8_replacements: old.replacements,
                    layout: SampleLayout::V1_9,
                    layout_reason: Some(LayoutReason::Inconsistent),
                },
            )),
            Err(old_problem) => Err(WireDecodeError::NeitherLayout {
                v1_10: problem,
                v1_9: old_problem,
            }),
        },
    }
}

/// Whether the samples of `request` fit its dictionary and their shapes: every
/// `attribute_indices` entry and `link_index` inside its table (0 always is), no attribute key
/// twice in one sample (1.9 values such as `[1, 1]` read as indices repeat), equal counts of
/// values and timestamps when a sample has both, and no profile whose samples all have
/// neither (what 1.9's values-only samples become when read as 1.10; one empty sample among
/// others is left to validation). The layouts differ exactly in these fields, so this is what
/// tells them apart; `stack_index` (field 1 in both) is left to validation. The first problem
/// is returned, with its path.
pub fn consistency(request: &ExportProfilesServiceRequest) -> Result<(), String> {
    let empty = ProfilesDictionary::default();
    let d = request.dictionary.as_ref().unwrap_or(&empty);
    let (attrs, links) = (d.attribute_table.len(), d.link_table.len());
    let inside = |i: i32, len: usize| i == 0 || usize::try_from(i).is_ok_and(|i| i < len);
    for (r, rp) in request.resource_profiles.iter().enumerate() {
        for (s, sp) in rp.scope_profiles.iter().enumerate() {
            for (p, profile) in sp.profiles.iter().enumerate() {
                let at = |k: usize| {
                    format!("resource_profiles[{r}].scope_profiles[{s}].profiles[{p}].samples[{k}]")
                };
                let mut shaped = profile.samples.is_empty();
                for (k, sample) in profile.samples.iter().enumerate() {
                    if let Some(i) = sample
                        .attribute_indices
                        .iter()
                        .find(|&&i| !inside(i, attrs))
                    {
                        return Err(format!(
                            "{}: attribute index {i} outside attribute_table (len {attrs})",
                            at(k)
                        ));
                    }
                    if let Some(i) = repeated_key(&sample.attribute_indices, d) {
                        return Err(format!(
                            "{}: attribute key of index {i} appears twice in the sample",
                            at(k)
                        ));
                    }
                    if !inside(sample.link_index, links) {
                        return Err(format!(
                            "{}: link_index {} outside link_table (len {links})",
                            at(k),
                            sample.link_index
                        ));
                    }
                    let (nv, nt) = (sample.values.len(), sample.timestamps_unix_nano.len());
                    if nv != 0 && nt != 0 && nv != nt {
                        return Err(format!("{}: {nv} values but {nt} timestamps", at(k)));
                    }
                    shaped |= nv != 0 || nt != 0;
                }
                if !shaped {
                    return Err(format!(
                        "resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]: no sample has values or timestamps"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The first attribute index of `indices` (all inside the table) whose key an earlier one has
/// (an index repeated included); only the first 32 are compared.
fn repeated_key(indices: &[i32], d: &ProfilesDictionary) -> Option<i32> {
    if indices.len() < 2 {
        return None;
    }
    let key = |i: i32| {
        usize::try_from(i)
            .ok()
            .and_then(|i| d.attribute_table.get(i))
            .map(|a| a.key_strindex)
    };
    let n = indices.len().min(32);
    for b in 1..n {
        for a in 0..b {
            if indices[a] == indices[b]
                || (key(indices[a]).is_some() && key(indices[a]) == key(indices[b]))
            {
                return Some(indices[b]);
            }
        }
    }
    None
}
