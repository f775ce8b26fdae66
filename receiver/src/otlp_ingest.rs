//! OTLP profiles as the receivers ingest them ([`IngestSignal`] for [`Profiles`]): the
//! validation that splits a request into its valid and invalid profiles.
//!
//! * The dictionary is checked once ([`validate_dictionary`]); if it has errors nothing in the
//!   request can be read and the whole request is refused (`INVALID_ARGUMENT` / 400).
//! * Every profile is checked against it ([`validate_profile`]); profiles with errors are
//!   removed and counted in `partial_success.rejected_profiles`, with the first findings in
//!   `error_message`. Scopes and resources left without profiles are dropped.
//! * Warnings never reject anything and are not reported to the client.
//! * A full success has no `partial_success`. When every profile is invalid the answer is still
//!   a partial success (all rejected), as the OTLP spec asks: the client must not retry it.

use crate::batch::{Consumer, Payload};
use crate::otlp_export::{IngestSignal, MESSAGE_FINDINGS, Refused, Split, rejection_message};
use crate::stats::Counters;
use profilink_proto::otlp::{ExportProfilesServiceRequest, data_from_request};
use profilink_proto::signal::{ItemCounts, Profiles, Signal, profile_samples};
use profilink_proto::validate::{Finding, has_errors, validate_dictionary, validate_profile};

impl IngestSignal for Profiles {
    /// Every consumer takes profiles.
    fn accepted_by<C: Consumer>(_consumer: &C) -> bool {
        true
    }

    fn ingest(request: ExportProfilesServiceRequest) -> Result<Split, Refused> {
        ingest(request)
    }

    fn count_accepted(counters: &Counters, counts: ItemCounts) {
        counters.accept(counts.items, counts.samples);
    }

    fn count_refused(counters: &Counters, counts: ItemCounts) {
        counters.refuse(counts.items, counts.samples);
    }
}

/// Validates `request` and splits off its invalid profiles (the payload is
/// [`Payload::Otlp`], with the request's dictionary).
pub fn ingest(request: ExportProfilesServiceRequest) -> Result<Split, Refused> {
    let dictionary_findings = validate_dictionary(request.dictionary.as_ref());
    if has_errors(&dictionary_findings) {
        let errors: Vec<&Finding> = dictionary_findings
            .iter()
            .filter(|f| f.is_error())
            .collect();
        let quoted: Vec<String> = errors
            .iter()
            .take(MESSAGE_FINDINGS)
            .map(ToString::to_string)
            .collect();
        let mut message = format!("invalid dictionary: {}", quoted.join("; "));
        if errors.len() > MESSAGE_FINDINGS {
            message.push_str(&format!(
                " (and {} more findings)",
                errors.len() - MESSAGE_FINDINGS
            ));
        }
        return Err(Refused {
            message,
            counts: Profiles::counts(&request),
        });
    }
    let mut data = data_from_request(request);
    let mut valid = ItemCounts::default();
    let mut rejected = ItemCounts::default();
    let mut quoted: Vec<String> = Vec::new();
    let mut error_count = 0u64;
    let dictionary = data.dictionary.take();
    for (r, rp) in data.resource_profiles.iter_mut().enumerate() {
        for (s, sp) in rp.scope_profiles.iter_mut().enumerate() {
            let mut p = 0usize;
            sp.profiles.retain(|profile| {
                let path = format!("resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]");
                p += 1;
                let findings = validate_profile(dictionary.as_ref(), profile, &path);
                let counts = ItemCounts {
                    items: 1,
                    samples: profile_samples(profile),
                };
                if has_errors(&findings) {
                    rejected = rejected.plus(counts);
                    for f in findings.into_iter().filter(Finding::is_error) {
                        error_count += 1;
                        if quoted.len() < MESSAGE_FINDINGS {
                            quoted.push(f.to_string());
                        }
                    }
                    false
                } else {
                    valid = valid.plus(counts);
                    true
                }
            });
        }
        rp.scope_profiles.retain(|sp| !sp.profiles.is_empty());
    }
    data.resource_profiles
        .retain(|rp| !rp.scope_profiles.is_empty());
    data.dictionary = dictionary;
    let error_message = if rejected.items > 0 {
        rejection_message(
            rejected.items,
            "profile(s)",
            &quoted,
            error_count,
            " findings",
        )
    } else {
        String::new()
    };
    Ok(Split {
        payload: Payload::Otlp(data),
        valid,
        rejected,
        error_message,
    })
}
