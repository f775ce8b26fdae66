//! Using profilink's crates as a library: translate an OTLP profiles file (binary protobuf or
//! OTLP/JSON) into Sentry profile chunks, one JSON chunk per line (NDJSON), each written as
//! soon as the translator cuts it.
//!
//! ```sh
//! cargo run --example translate_file -- tests/fixtures/otlp/ebpf-profile.pb > chunks.ndjson
//! ```

use profilink_translator::decode_otlp;
use profilink_translator::otlp_to_sentry::{self, ChunkOptions, SparseThreadPolicy};
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: translate_file <otlp file (.pb or .json)>");
        return ExitCode::from(2);
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(1);
        }
    };
    // Protobuf or OTLP/JSON, detected. (`profilink_translator::otlp_bytes_to_chunks` does
    // this and the translation in one call, returning all chunks at once.)
    let request = match decode_otlp(&bytes, None) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{path}: {:#}", anyhow::Error::new(e));
            return ExitCode::from(1);
        }
    };
    // Drop threads Relay would drop anyway: this output goes to Sentry as it is.
    let options = ChunkOptions {
        sparse_thread_policy: SparseThreadPolicy::Drop,
        ..Default::default()
    };
    // Each chunk is written as soon as it is cut (`to_chunks_with`), so the whole output is
    // never in memory; `to_chunks` would return them all in `ChunkTranslation::chunks`.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut write_failed = false;
    let t = otlp_to_sentry::to_chunks_with(
        request.dictionary.as_ref(),
        &request.resource_profiles,
        &options,
        &mut |chunk| {
            write_failed = write_failed
                || serde_json::to_writer(&mut out, &chunk).is_err()
                || out.write_all(b"\n").is_err();
        },
    );
    if write_failed || out.flush().is_err() {
        return ExitCode::from(1);
    }
    for r in &t.rejected {
        eprintln!("{}: {}", r.path, r.error);
    }
    eprintln!(
        "{} profile(s): {} chunk(s), {} sample(s), {} rejected",
        t.stats.profiles,
        t.stats.chunks,
        t.stats.samples_out,
        t.rejected.len()
    );
    if t.rejected.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
