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
//! * Every profile is counted in profiles, observations and sample records (by `sample_type`,
//!   [`crate::sample_records`]), accepted or refused; a request refused as a whole counts all
//!   of its profiles as refused (labels resolved as far as its string table allows).
//! * The version and decoders are [`crate::profiles_version`]'s.

use crate::otlp::ingest::{
    BodyDecodeError, IngestSignal, MESSAGE_FINDINGS, Refused, Split, Tally, rejection_message,
};
use crate::profiles_version::{self, ProfilesVersion, VersionError};
use crate::stats::Counters;
use profilink_consumer::{Consumer, Payload};
use profilink_proto::otlp::{ExportProfilesServiceRequest, Profile, data_from_request};
use profilink_proto::otlp_json::OtlpJsonError;
use profilink_proto::signal::{ItemCounts, Profiles, profile_samples};
use profilink_proto::validate::{Finding, has_errors, validate_dictionary, validate_profile};

impl IngestSignal for Profiles {
    /// Every consumer takes profiles.
    fn accepted_by<C: Consumer>(_consumer: &C) -> bool {
        true
    }

    type Version = ProfilesVersion;

    fn request_version(headers: &http::HeaderMap) -> Result<ProfilesVersion, VersionError> {
        profiles_version::request_version(headers)
    }

    fn decode_protobuf<B: bytes::Buf>(
        version: ProfilesVersion,
        body: B,
    ) -> Result<ExportProfilesServiceRequest, BodyDecodeError> {
        Ok(version.decode_protobuf(body)?)
    }

    fn decode_json(
        version: ProfilesVersion,
        body: &[u8],
    ) -> Result<ExportProfilesServiceRequest, OtlpJsonError> {
        version.decode_json(body)
    }

    fn ingest(request: ExportProfilesServiceRequest) -> Result<Split, Refused> {
        ingest(request)
    }

    fn count_accepted(counters: &Counters, tally: &Tally) {
        counters.accept(tally.counts.items, tally.counts.samples);
        counters.accept_records(&tally.records);
    }

    fn count_refused(counters: &Counters, tally: &Tally) {
        counters.refuse(tally.counts.items, tally.counts.samples);
        counters.refuse_records(&tally.records);
    }
}

/// Adds `profile` to `tally`.
fn add_profile(
    tally: &mut Tally,
    dictionary: Option<&profilink_proto::otlp::ProfilesDictionary>,
    profile: &Profile,
) {
    tally.counts = tally.counts.plus(ItemCounts {
        items: 1,
        samples: profile_samples(profile),
    });
    tally.records.add_profile(dictionary, profile);
}

/// Everything in `request`.
fn tally_of(request: &ExportProfilesServiceRequest) -> Tally {
    let mut tally = Tally::default();
    let dictionary = request.dictionary.as_ref();
    for profile in request
        .resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles)
    {
        add_profile(&mut tally, dictionary, profile);
    }
    tally
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
            tally: tally_of(&request),
        });
    }
    let mut data = data_from_request(request);
    let mut valid = Tally::default();
    let mut rejected = Tally::default();
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
                if has_errors(&findings) {
                    add_profile(&mut rejected, dictionary.as_ref(), profile);
                    for f in findings.into_iter().filter(Finding::is_error) {
                        error_count += 1;
                        if quoted.len() < MESSAGE_FINDINGS {
                            quoted.push(f.to_string());
                        }
                    }
                    false
                } else {
                    add_profile(&mut valid, dictionary.as_ref(), profile);
                    true
                }
            });
        }
        rp.scope_profiles.retain(|sp| !sp.profiles.is_empty());
    }
    data.resource_profiles
        .retain(|rp| !rp.scope_profiles.is_empty());
    data.dictionary = dictionary;
    let error_message = if rejected.counts.items > 0 {
        rejection_message(
            rejected.counts.items,
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
