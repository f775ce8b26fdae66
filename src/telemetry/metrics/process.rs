//! The process itself: the Collector's `otelcol_process_uptime`, `otelcol_process_cpu_seconds`
//! and `otelcol_process_memory_rss`, and profilink's `profilink_process_resident_memory_bytes`
//! and `profilink_build_info`. CPU time and RSS are read from Linux's `/proc/self`; elsewhere
//! those families are left out.

use profilink_consumer::telemetry::{Render, Text};
use std::sync::OnceLock;
use std::time::Instant;

/// Clock ticks per second in `/proc/self/stat` (`USER_HZ`, 100 on every Linux ABI).
const USER_HZ: f64 = 100.0;

static START: OnceLock<Instant> = OnceLock::new();

/// Notes the process start for `otelcol_process_uptime` (the first call wins; the registry
/// calls it when it is built, early in the start).
pub fn mark_start() -> Instant {
    *START.get_or_init(Instant::now)
}

/// Resident set size of this process in bytes (Linux `/proc/self/status` `VmRSS`), if known.
pub fn resident_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// User plus system CPU time of this process in seconds (Linux `/proc/self/stat` `utime` and
/// `stime`), if known.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after its `)` are fixed.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

/// The process's own metrics.
pub struct Process;

impl Render for Process {
    fn render(&self, f: &mut Text<'_>) {
        let name = "otelcol_process_uptime_total";
        f.header(name, "counter", "Uptime of the process in seconds.");
        f.sample_f64(name, &[], mark_start().elapsed().as_secs_f64());
        if let Some(cpu) = cpu_seconds() {
            let name = "otelcol_process_cpu_seconds_total";
            f.header(
                name,
                "counter",
                "Total CPU user and system time in seconds.",
            );
            f.sample_f64(name, &[], cpu);
        }
        if let Some(rss) = resident_memory_bytes() {
            let name = "otelcol_process_memory_rss";
            f.header(
                name,
                "gauge",
                "Total physical memory (resident set size) in bytes.",
            );
            f.sample(name, &[], rss);
            let name = "profilink_process_resident_memory_bytes";
            f.header(name, "gauge", "Resident set size in bytes.");
            f.sample(name, &[], rss);
        }
        let name = "profilink_build_info";
        f.header(name, "gauge", "Build information; always 1.");
        f.sample(name, &[("version", env!("CARGO_PKG_VERSION"))], 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_cpu_time_and_rss_on_linux() {
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed().as_millis() < 60 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(cpu_seconds().is_some_and(|s| s > 0.0));
        assert!(resident_memory_bytes().is_some_and(|b| b > 0));
    }
}
