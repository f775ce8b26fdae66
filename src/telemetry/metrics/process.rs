//! `profilink_process_*` and `profilink_build_info`: the process itself.

use super::text::{Render, Text};

/// Resident set size of this process in bytes (Linux `/proc/self/status` `VmRSS`), if known.
pub fn resident_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The process's own metrics.
pub struct Process;

impl Render for Process {
    fn render(&self, f: &mut Text<'_>) {
        if let Some(rss) = resident_memory_bytes() {
            let name = "profilink_process_resident_memory_bytes";
            f.header(name, "gauge", "Resident set size in bytes.");
            f.sample(name, &[], rss);
        }
        let name = "profilink_build_info";
        f.header(name, "gauge", "Build information; always 1.");
        f.sample(name, &[("version", env!("CARGO_PKG_VERSION"))], 1);
    }
}
