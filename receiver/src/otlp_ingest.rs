//! What both OTLP transports do with a decoded request: validate it, split off the invalid
//! profiles (partial success), hand the rest to the consumer, and count.
//!
//! * The dictionary is checked once ([`validate_dictionary`]); if it has errors nothing in the
//!   request can be read and the whole request is refused (`INVALID_ARGUMENT` / 400).
//! * Every profile is checked against it ([`validate_profile`]); profiles with errors are
//!   removed and counted in `partial_success.rejected_profiles`, with the first findings in
//!   `error_message`. Scopes and resources left without profiles are dropped.
//! * Warnings never reject anything and are not reported to the client.
//! * A full success has no `partial_success`. When every profile is invalid the answer is still
//!   a partial success (all rejected), as the OTLP spec asks: the client must not retry it.

use crate::batch::{
    Batch, ConsumeError, Consumer, Payload, ReceiverKind, Transport, otlp_counts,
    otlp_profile_samples,
};
use crate::stats::Counters;
use profilink_proto::otlp::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
    ProfilesData, data_from_request,
};
use profilink_proto::validate::{Finding, has_errors, validate_dictionary, validate_profile};

/// How many findings an error message quotes.
pub const MESSAGE_FINDINGS: usize = 3;

/// The request could not be accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportError {
    /// The request is unusable as a whole (e.g. its dictionary is broken).
    Invalid(String),
    /// The consumer refused the valid part.
    Consumer(ConsumeError),
}

/// The valid part of a request and what was rejected.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ingested {
    /// The valid profiles, with the request's dictionary.
    pub data: ProfilesData,
    /// Profiles in `data`.
    pub profiles: u64,
    /// Observations in `data`.
    pub samples: u64,
    /// Profiles removed as invalid.
    pub rejected_profiles: u64,
    /// Observations in the removed profiles.
    pub rejected_samples: u64,
    /// The first findings of the removed profiles (empty when none were removed).
    pub error_message: String,
}

/// A request refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidRequest {
    /// Why, with the first findings.
    pub message: String,
    /// Profiles in the request.
    pub profiles: u64,
    /// Observations in the request.
    pub samples: u64,
}

/// Validates `request` and splits off its invalid profiles.
pub fn ingest(request: ExportProfilesServiceRequest) -> Result<Ingested, InvalidRequest> {
    let mut data = data_from_request(request);
    let dictionary_findings = validate_dictionary(data.dictionary.as_ref());
    if has_errors(&dictionary_findings) {
        let (profiles, samples) = otlp_counts(&data);
        let message = format!(
            "invalid dictionary: {}",
            summarize(dictionary_findings.iter().filter(|f| f.is_error()))
        );
        return Err(InvalidRequest {
            message,
            profiles,
            samples,
        });
    }
    let mut out = Ingested::default();
    let mut errors: Vec<Finding> = Vec::new();
    let mut error_count = 0usize;
    let dictionary = data.dictionary.take();
    for (r, rp) in data.resource_profiles.iter_mut().enumerate() {
        for (s, sp) in rp.scope_profiles.iter_mut().enumerate() {
            let mut p = 0usize;
            sp.profiles.retain(|profile| {
                let path = format!("resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]");
                p += 1;
                let findings = validate_profile(dictionary.as_ref(), profile, &path);
                let samples = otlp_profile_samples(profile);
                if has_errors(&findings) {
                    out.rejected_profiles += 1;
                    out.rejected_samples += samples;
                    for f in findings.into_iter().filter(Finding::is_error) {
                        error_count += 1;
                        if errors.len() < MESSAGE_FINDINGS {
                            errors.push(f);
                        }
                    }
                    false
                } else {
                    out.profiles += 1;
                    out.samples += samples;
                    true
                }
            });
        }
        rp.scope_profiles.retain(|sp| !sp.profiles.is_empty());
    }
    data.resource_profiles
        .retain(|rp| !rp.scope_profiles.is_empty());
    data.dictionary = dictionary;
    if out.rejected_profiles > 0 {
        let more = error_count.saturating_sub(errors.len());
        let mut message = format!(
            "{} invalid profile(s) rejected: {}",
            out.rejected_profiles,
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
        if more > 0 {
            message.push_str(&format!(" (and {more} more findings)"));
        }
        out.error_message = message;
    }
    out.data = data;
    Ok(out)
}

fn summarize<'a>(findings: impl Iterator<Item = &'a Finding>) -> String {
    let all: Vec<&Finding> = findings.collect();
    let mut text = all
        .iter()
        .take(MESSAGE_FINDINGS)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    if all.len() > MESSAGE_FINDINGS {
        text.push_str(&format!(
            " (and {} more findings)",
            all.len() - MESSAGE_FINDINGS
        ));
    }
    text
}

/// Validates `request`, hands its valid part to `consumer`, counts into `counters`, and
/// returns the response to send (with `partial_success` only when profiles were rejected).
pub async fn export<C: Consumer>(
    consumer: &C,
    counters: &Counters,
    transport: Transport,
    request: ExportProfilesServiceRequest,
) -> Result<ExportProfilesServiceResponse, ExportError> {
    let ingested = match ingest(request) {
        Ok(i) => i,
        Err(InvalidRequest {
            message,
            profiles,
            samples,
        }) => {
            counters.refuse(profiles, samples);
            tracing::debug!(%transport, %message, "OTLP request refused");
            return Err(ExportError::Invalid(message));
        }
    };
    let Ingested {
        data,
        profiles,
        samples,
        rejected_profiles,
        rejected_samples,
        error_message,
    } = ingested;
    if profiles > 0 {
        let batch = Batch {
            receiver: ReceiverKind::Otlp,
            transport,
            payload: Payload::Otlp(data),
            samples,
            profiles,
        };
        if let Err(e) = consumer.consume(batch).await {
            counters.refuse(profiles + rejected_profiles, samples + rejected_samples);
            tracing::debug!(%transport, error = %e, "OTLP batch refused by the pipeline");
            return Err(ExportError::Consumer(e));
        }
    }
    counters.accept(profiles, samples);
    counters.refuse(rejected_profiles, rejected_samples);
    let partial_success = if rejected_profiles > 0 {
        tracing::debug!(%transport, rejected_profiles, message = %error_message, "OTLP profiles rejected");
        Some(ExportProfilesPartialSuccess {
            rejected_profiles: i64::try_from(rejected_profiles).unwrap_or(i64::MAX),
            error_message,
        })
    } else {
        None
    };
    Ok(ExportProfilesServiceResponse { partial_success })
}
