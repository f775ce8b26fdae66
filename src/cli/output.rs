//! Where `translate` writes: a file written atomically (a temporary file in the same
//! directory renamed into place), or standard output.

use anyhow::{Context, Result};
use profilink_exporter::write_atomic;
use std::io::Write;
use std::path::Path;

/// The directory (`.` when none is given) and file name of an output path.
pub(super) fn dir_and_name(path: &Path) -> Result<(&Path, String)> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let name = path.file_name().context("output path has no file name")?;
    Ok((
        dir.unwrap_or(Path::new(".")),
        name.to_string_lossy().into_owned(),
    ))
}

/// Writes `bytes` to `path` atomically, or to standard output.
pub(super) fn write_output(path: Option<&Path>, bytes: &[u8]) -> Result<()> {
    match path {
        Some(p) => {
            let (dir, name) = dir_and_name(p)?;
            write_atomic(dir, &name, bytes)
                .with_context(|| format!("cannot write {}", p.display()))?;
            Ok(())
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(bytes)?;
            stdout.flush()?;
            Ok(())
        }
    }
}
