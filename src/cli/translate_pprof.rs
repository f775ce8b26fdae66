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
use std::time::{SystemTime, UNIX_EPOCH};

/// The OTLP request of a pprof or folded input (already decompressed by
/// [`super::input::read_input`], within its size cap). Folded stacks are given the input
/// file's modification time (standard input: the current time) as their time.
pub fn read_request(input: &Input) -> Result<ExportProfilesServiceRequest> {
    let data: ProfilesData = match input.format {
        InputFormat::Folded => {
            // Folded stacks carry no time: the file's modification time (when the profiler
            // wrote it), or now for standard input.
            let time = std::fs::metadata(&input.name)
                .and_then(|m| m.modified())
                .unwrap_or_else(|_| SystemTime::now());
            let opts = FoldedOptions {
                time_unix_nano: time
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
                ..FoldedOptions::default()
            };
            folded_to_otlp(&input.bytes, &opts)?
        }
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
    super::output::write_output(output, &out.to_gzip())?;
    eprintln!(
        "{name}: pprof written: {} sample(s), {} observation(s)",
        out.profile.sample.len(),
        out.observations
    );
    Ok(EXIT_OK)
}
