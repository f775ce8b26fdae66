//! CPU profiles of profilink itself with the `pprof` crate (pprof-rs): a `SIGPROF` timer
//! samples the stacks of whichever threads use CPU, 100 times per CPU second, as Go's
//! `runtime/pprof` does; the samples are encoded as a gzipped `perftools.profiles.Profile`.
//!
//! The process has one profiler, so one profile runs at a time ([`CpuProfiler::try_start`]).
//! A capture runs on a blocking thread that waits on a channel: dropping the sender (the
//! client went away, the service stops) ends it early without a profile.

use flate2::Compression;
use flate2::write::GzEncoder;
use pprof::protos::Message;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// Samples per CPU second (Go's `runtime/pprof` rate).
pub const FREQUENCY_HZ: i32 = 100;

/// Shared libraries whose frames are not unwound in the signal handler (unwinding inside them
/// can deadlock or crash), as pprof-rs recommends.
const BLOCKLIST: [&str; 4] = ["libc", "libgcc", "pthread", "vdso"];

/// Why a profile could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Another profile is being taken.
    #[error("a CPU profile is already being taken{0}; try again when it ends")]
    Busy(&'static str),
    /// The profiler could not start or report.
    #[error("CPU profiler: {0}")]
    Profiler(#[from] pprof::Error),
    /// The profile could not be encoded.
    #[error("encoding the profile: {0}")]
    Encode(String),
    /// The capture was called off before its end (client gone, service stopping).
    #[error("the profile was cancelled")]
    Cancelled,
}

/// The process's one CPU profiler: at most one profile at a time.
#[derive(Debug, Default)]
pub struct CpuProfiler {
    busy: AtomicBool,
    /// True while `save_to_file` holds the profiler for the whole run.
    whole_run: AtomicBool,
}

/// The right to profile, released when dropped.
#[derive(Debug)]
pub struct Slot(Arc<CpuProfiler>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

impl CpuProfiler {
    /// Takes the profiler, or says why not.
    pub fn try_start(self: &Arc<Self>) -> Result<Slot, CaptureError> {
        if self
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            Ok(Slot(Arc::clone(self)))
        } else if self.whole_run.load(Ordering::Acquire) {
            Err(CaptureError::Busy(" (save_to_file profiles the whole run)"))
        } else {
            Err(CaptureError::Busy(""))
        }
    }

    /// Takes the profiler for the whole run (`save_to_file`).
    pub fn start_whole_run(self: &Arc<Self>) -> Result<Slot, CaptureError> {
        let slot = self.try_start()?;
        self.whole_run.store(true, Ordering::Release);
        Ok(slot)
    }
}

/// Samples for `duration` unless `cancel` ends first (a message or a dropped sender), then
/// returns the gzipped profile. Blocks: run it on a blocking thread, holding `slot`.
pub fn capture(
    slot: Slot,
    duration: Duration,
    cancel: &Receiver<()>,
) -> Result<Vec<u8>, CaptureError> {
    let guard = start()?;
    match cancel.recv_timeout(duration) {
        Err(RecvTimeoutError::Timeout) => {}
        Ok(()) | Err(RecvTimeoutError::Disconnected) => return Err(CaptureError::Cancelled),
    }
    let profile = encode(&guard);
    drop(guard);
    drop(slot);
    profile
}

/// Samples until `stop` says so (a message or a dropped sender), then returns the gzipped
/// profile of the whole time (`save_to_file`); `started` is called once sampling runs (or
/// failed to start). Blocks.
pub fn capture_until(
    slot: Slot,
    stop: &Receiver<()>,
    started: impl FnOnce(),
) -> Result<Vec<u8>, CaptureError> {
    let guard = start();
    started();
    let guard = guard?;
    let _ = stop.recv();
    let profile = encode(&guard);
    drop(guard);
    drop(slot);
    profile
}

/// Starts sampling. The first start in a process resolves a backtrace (pprof-rs warms its
/// symbol cache), which reads the binary's debug info: up to seconds in a debug build.
fn start() -> Result<pprof::ProfilerGuard<'static>, CaptureError> {
    Ok(pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY_HZ)
        .blocklist(&BLOCKLIST)
        .build()?)
}

/// The symbolized samples of `guard` as a gzipped pprof protobuf.
fn encode(guard: &pprof::ProfilerGuard<'static>) -> Result<Vec<u8>, CaptureError> {
    let report = guard.report().build()?;
    let profile = report.pprof()?;
    let bytes = profile
        .write_to_bytes()
        .map_err(|e| CaptureError::Encode(e.to_string()))?;
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&bytes)
        .and_then(|()| gz.finish())
        .map_err(|e| CaptureError::Encode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_profile_at_a_time() {
        let p = Arc::new(CpuProfiler::default());
        let slot = p.try_start().unwrap();
        let e = p.try_start().unwrap_err();
        assert_eq!(
            e.to_string(),
            "a CPU profile is already being taken; try again when it ends"
        );
        drop(slot);
        let whole = p.start_whole_run().unwrap();
        let e = p.try_start().unwrap_err();
        assert!(e.to_string().contains("save_to_file"), "{e}");
        drop(whole);
    }

    #[test]
    fn a_cancelled_capture_returns_no_profile() {
        let p = Arc::new(CpuProfiler::default());
        let (tx, rx) = std::sync::mpsc::channel();
        drop(tx);
        let r = capture(p.try_start().unwrap(), Duration::from_secs(30), &rx);
        assert!(matches!(r, Err(CaptureError::Cancelled)), "{r:?}");
        // The slot is free again.
        assert!(p.try_start().is_ok());
    }
}
