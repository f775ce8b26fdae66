//! Function fingerprints, computed the way Sentry computes them.
//!
//! Sentry identifies a function across profiles by a 32-bit fingerprint of the frame's
//! "module or package" and its function name. The ingestion side that fills Sentry's functions
//! dataset today is getsentry/vroomrs (`src/frame/mod.rs`, `Frame::fingerprint(None)`):
//!
//! * `module_or_package` is the frame's `module` when non-empty, else its `package` reduced to
//!   the last path component without a `.dylib`/`.so`/`.a`/`.dll`/`.exe` extension (Sentry's
//!   `trimPackage`, shared by vroom `internal/frame/frame.go`), else the empty string;
//! * the hasher is `fnv_rs::Fnv64` — the 64-bit **FNV-1a** hash (offset basis
//!   `0xcbf29ce484222325`, prime `0x100000001b3`) — over `module_or_package`, the byte `:`, and
//!   the function name (empty when absent);
//! * the 64-bit result is truncated to its low 32 bits (`as u32`).
//!
//! The older Go service getsentry/vroom (`internal/frame/frame.go`, `Frame.Fingerprint`) hashes
//! the same bytes with Go's `hash/fnv.New64`, which is **FNV-1** (multiply before xor), so its
//! values differ. vroom still renders flamegraphs, so fingerprints from older function rows or
//! vroom output are FNV-1 values: [`legacy_fingerprint`] computes those, and the flamegraph API
//! accepts either when selecting a function. Frames and metrics in responses carry
//! [`fingerprint`] (the vroomrs value).

use profilink_proto::sentry::Frame;

const FNV64_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV64_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a over `parts` concatenated.
fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut h = FNV64_OFFSET;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(FNV64_PRIME);
        }
    }
    h
}

/// 64-bit FNV-1 over `parts` concatenated.
fn fnv1_64(parts: &[&[u8]]) -> u64 {
    let mut h = FNV64_OFFSET;
    for part in parts {
        for &b in *part {
            h = h.wrapping_mul(FNV64_PRIME);
            h ^= u64::from(b);
        }
    }
    h
}

/// Sentry's `trimPackage`: the last path component of a package path (the one before a trailing
/// separator when the path ends with one), without a native library extension.
pub fn trim_package(pkg: &str) -> String {
    let windows = is_windows_path(pkg);
    let sep = if windows { '\\' } else { '/' };
    let pieces: Vec<&str> = pkg.split(sep).collect();
    let mut name = pieces.last().copied().unwrap_or(pkg);
    if pieces.len() >= 2 && name.is_empty() {
        name = pieces[pieces.len() - 2];
    }
    if name.is_empty() {
        name = pkg;
    }
    for ext in [".dylib", ".so", ".a", ".dll", ".exe"] {
        if let Some(stripped) = name.strip_suffix(ext) {
            return stripped.to_string();
        }
    }
    name.to_string()
}

/// `^([a-z]:\\|\\\\)` case-insensitively: a drive letter path or a UNC path.
fn is_windows_path(pkg: &str) -> bool {
    let b = pkg.as_bytes();
    (b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\')
        || pkg.starts_with("\\\\")
}

/// The frame's module when non-empty, else its trimmed package, else `""` (vroom's
/// `ModuleOrPackage`); this is the `package`/`image` Sentry shows for a function.
pub fn module_or_package(frame: &Frame) -> String {
    match (frame.module.as_deref(), frame.package.as_deref()) {
        (Some(m), _) if !m.is_empty() => m.to_string(),
        (_, Some(p)) if !p.is_empty() => trim_package(p),
        _ => String::new(),
    }
}

/// Sentry's function fingerprint of `function` in `module_or_package` (vroomrs, FNV-1a).
pub fn fingerprint_of(module_or_package: &str, function: &str) -> u32 {
    fnv1a64(&[module_or_package.as_bytes(), b":", function.as_bytes()]) as u32
}

/// vroom's (Go) fingerprint of `function` in `module_or_package` (FNV-1).
pub fn legacy_fingerprint_of(module_or_package: &str, function: &str) -> u32 {
    fnv1_64(&[module_or_package.as_bytes(), b":", function.as_bytes()]) as u32
}

/// Sentry's function fingerprint of a frame, as vroomrs computes it at ingestion.
pub fn fingerprint(frame: &Frame) -> u32 {
    fingerprint_of(
        &module_or_package(frame),
        frame.function.as_deref().unwrap_or_default(),
    )
}

/// The fingerprint getsentry/vroom (Go) computes for a frame (FNV-1 instead of FNV-1a).
pub fn legacy_fingerprint(frame: &Frame) -> u32 {
    legacy_fingerprint_of(
        &module_or_package(frame),
        frame.function.as_deref().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(module: Option<&str>, package: Option<&str>, function: Option<&str>) -> Frame {
        Frame {
            module: module.map(Into::into),
            package: package.map(Into::into),
            function: function.map(Into::into),
            ..Default::default()
        }
    }

    /// vroomrs `src/nodetree.rs` test `test_node_collect_functions` pins
    /// `FINGERPRINT_FOO = 2655321105` for a frame with package `foo` and function `foo`.
    #[test]
    fn matches_vroomrs_pinned_value() {
        assert_eq!(
            fingerprint(&frame(None, Some("foo"), Some("foo"))),
            2_655_321_105
        );
        assert_eq!(fingerprint_of("foo", "foo"), 2_655_321_105);
    }

    /// vroom `internal/flamegraph/flamegraph_test.go` pins `2430275452` for package
    /// `test.package`, function `a` (and `…455` for `b`).
    #[test]
    fn matches_vroom_go_pinned_value() {
        assert_eq!(legacy_fingerprint_of("test.package", "a"), 2_430_275_452);
        assert_eq!(legacy_fingerprint_of("test.package", "b"), 2_430_275_455);
    }

    /// Values checked against vroomrs 0.1.24 from PyPI (`extract_functions_metrics`).
    #[test]
    fn matches_vroomrs_wheel_values() {
        assert_eq!(fingerprint_of("app.worker", "do_work"), 1_501_534_361);
        assert_eq!(fingerprint_of("libjson", "loads"), 4_213_520_137);
        assert_eq!(fingerprint_of("", "nomod"), 867_725_334);
    }

    #[test]
    fn module_wins_over_package_and_package_is_trimmed() {
        let f = frame(Some("app.web"), Some("/usr/lib/libfoo.so"), Some("f"));
        assert_eq!(module_or_package(&f), "app.web");
        let f = frame(Some(""), Some("/usr/lib/libfoo.so"), Some("f"));
        assert_eq!(module_or_package(&f), "libfoo");
        assert_eq!(trim_package("/usr/lib/"), "lib");
        assert_eq!(
            trim_package("C:\\Windows\\System32\\kernel32.dll"),
            "kernel32"
        );
        assert_eq!(trim_package("\\\\server\\share\\x.exe"), "x");
        assert_eq!(trim_package("Foundation"), "Foundation");
        assert_eq!(module_or_package(&frame(None, None, Some("f"))), "");
    }

    #[test]
    fn fnv_variants_differ() {
        assert_ne!(fingerprint_of("a", "b"), legacy_fingerprint_of("a", "b"));
    }
}
