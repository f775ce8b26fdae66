//! Reading input files: standard input, transparent gzip/zstd decompression with a size cap,
//! and format detection.

use anyhow::{Context, Result, bail};
use profilink_proto::input::{InputFormat, detect};
use std::io::Read;
use std::path::Path;

/// Largest decompressed input accepted (protects against decompression bombs).
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// An input file's bytes and format.
pub struct Input {
    /// Display name (the path, or `-`).
    pub name: String,
    /// Decompressed contents.
    pub bytes: Vec<u8>,
    /// Detected or forced format.
    pub format: InputFormat,
}

/// Reads `path` (`-` for stdin), decompresses it when gzip/zstd, and detects its format unless
/// `forced`.
pub fn read_input(path: &Path, forced: Option<InputFormat>) -> Result<Input> {
    let name = path.display().to_string();
    let raw = if name == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut buf)
            .context("cannot read standard input")?;
        buf
    } else {
        std::fs::read(path).with_context(|| format!("cannot read {name}"))?
    };
    let bytes = decompress(raw).with_context(|| format!("cannot decompress {name}"))?;
    let format = forced.unwrap_or_else(|| detect(&bytes));
    Ok(Input {
        name,
        bytes,
        format,
    })
}

fn decompress(raw: Vec<u8>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if raw.starts_with(&[0x1f, 0x8b]) {
        flate2::read::MultiGzDecoder::new(raw.as_slice())
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut out)?;
    } else if raw.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        zstd::stream::read::Decoder::new(raw.as_slice())?
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut out)?;
    } else {
        return Ok(raw);
    }
    if out.len() as u64 > MAX_INPUT_BYTES {
        bail!("decompressed size exceeds {MAX_INPUT_BYTES} bytes");
    }
    Ok(out)
}

/// Splits NDJSON into its non-blank lines with their 1-based line numbers.
pub use profilink_translator::ndjson_lines;
