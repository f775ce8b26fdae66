//! `translate`'s pprof and folded sides: pprof and folded inputs read as OTLP requests, and
//! `--to pprof` (one gzipped pprof profile that `go tool pprof` reads).

use super::EXIT_OK;
use super::input::{Input, MAX_INPUT_BYTES};
use anyhow::Result;
use profilink_proto::input::InputFormat;
use profilink_proto::otlp::{ExportProfilesServiceRequest, ProfilesData};
use profilink_translator::folded::{FoldedOptions, folded_to_otlp};
use profilink_translator::pprof::{PprofOptions, ToPprofOptions, request_to_pprof};
use profilink_translator::pprof_bytes_to_otlp;
use std::path::Path;

/// The OTLP request of a pprof or folded input (already decompressed by
/// [`super::input::read_input`], within its size cap).
pub fn read_request(input: &Input) -> Result<ExportProfilesServiceRequest> {
    let data: ProfilesData = match input.format {
        InputFormat::Folded => folded_to_otlp(&input.bytes, &FoldedOptions::default())?,
        _ => {
            let opts = PprofOptions {
                max_inflated_bytes: MAX_INPUT_BYTES,
                ..Default::default()
            };
            pprof_bytes_to_otlp(&input.bytes, &opts)?
        }
    };
    Ok(ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles,
        dictionary: data.dictionary,
    })
}

/// Writes `request`'s CPU and wall profiles as one gzipped pprof profile to `output`
/// (standard output when absent); says on stderr what was written and what was skipped.
pub fn write_pprof(
    name: &str,
    request: &ExportProfilesServiceRequest,
    output: Option<&Path>,
) -> Result<u8> {
    let out = request_to_pprof(request, &ToPprofOptions::default())?;
    for (sample_type, n) in &out.skipped {
        eprintln!(
            "{name}: skipped {n} profile(s) of sample type {sample_type} (not CPU/wall samples)"
        );
    }
    if out.siblings > 0 {
        eprintln!(
            "{name}: {} profile(s) were other sample types of a translated recording",
            out.siblings
        );
    }
    super::translate::write_output(output, &out.to_gzip())?;
    eprintln!(
        "{name}: pprof written: {} sample(s), {} observation(s)",
        out.profile.sample.len(),
        out.observations
    );
    Ok(EXIT_OK)
}
