//! The allocator the `profilink` binary ships with, as one macro
//! ([`global_allocator!`](crate::global_allocator!)), so the binary, its benchmarks and its
//! whole-process examples run on the same allocator with the same settings.
//!
//! jemalloc, as Relay and Vector ship: under the load test it kept a peak of 155-160 MiB
//! resident for a 70 MB heap where mimalloc v2 kept 300 MiB, at the same CPU per observation
//! within the runs' spread (glibc malloc took a quarter of the CPU). [`MALLOC_CONF`] returns
//! freed pages to the system within a second from a background thread instead of jemalloc's
//! 10 s, which is what holds the peak down; it costs no measurable CPU.

/// jemalloc's settings, read once at its start (the `_RJEM_MALLOC_CONF` environment variable
/// still overrides them): a background purging thread, dirty pages returned after 1 s and no
/// lazily-freed (muzzy) stage.
pub const MALLOC_CONF: &std::ffi::CStr =
    c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";

/// jemalloc's allocator type, for [`global_allocator!`](crate::global_allocator!).
pub use tikv_jemallocator::Jemalloc;

/// A `const char *` jemalloc reads at its start (a static C string, shared read-only).
#[repr(transparent)]
pub struct ConfPtr(pub *const std::ffi::c_char);

// SAFETY: the pointer is to a `'static` C string literal that is never written.
unsafe impl Sync for ConfPtr {}

/// Makes jemalloc the global allocator of the crate it is used in, with [`MALLOC_CONF`].
/// Use it once, at the top of a binary, bench or example.
#[macro_export]
macro_rules! global_allocator {
    () => {
        #[global_allocator]
        static GLOBAL: $crate::allocator::Jemalloc = $crate::allocator::Jemalloc;

        /// The settings jemalloc reads at its start (its `malloc_conf` symbol, prefixed as
        /// `tikv-jemalloc-sys` builds it).
        #[allow(non_upper_case_globals)]
        #[unsafe(export_name = "_rjem_malloc_conf")]
        static malloc_conf: $crate::allocator::ConfPtr =
            $crate::allocator::ConfPtr($crate::allocator::MALLOC_CONF.as_ptr());
    };
}
