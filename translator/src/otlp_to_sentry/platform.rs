//! Runtimes of frames and the chunk `platform`.
//!
//! Each OTLP location has a runtime from its `profile.frame.type` attribute. A location without
//! that attribute is *unspecified*, unless none of its frames has a function name, in which case
//! it is treated as native code.
//!
//! | `profile.frame.type` | runtime family | chunk platform | frame `platform` when foreign |
//! |---|---|---|---|
//! | `native`, `kernel`, `rust`, `unknown`, `abort-marker` | native | `rust` | `native` |
//! | `jvm` | jvm | `java` | `java` |
//! | `cpython` | cpython | `python` | `python` |
//! | `v8js` | v8js | `node` | `node` |
//! | `go` | go | `go` | `go` |
//! | `dotnet` | dotnet | `csharp` | `csharp` |
//! | `php`, `phpjit` | php | `php` | `php` |
//! | `ruby` | ruby | `ruby` | `ruby` |
//! | `perl` | perl | `perl` | `perl` |
//! | `beam` | beam | `elixir` | `elixir` |
//! | `luajit` | luajit | `other` | `other` |
//! | absent or any other value | unspecified | (follows the chunk) | never set |
//!
//! Native code maps to the chunk platform `rust` because Sentry symbolicates native addresses
//! (via `debug_meta`) only for the platforms `rust` and `cocoa`.
//!
//! The chunk platform of a session is chosen in this order:
//! 1. the managed runtime (any family but native/unspecified) of the most samples, where a
//!    sample's runtime is that of the leaf-most managed frame of its stack (ties: the order of
//!    the table above);
//! 2. else a hint from `telemetry.sdk.language` (`java`, `python`, `nodejs`→`node`,
//!    `webjs`→`javascript`, `go`, `dotnet`→`csharp`, `php`, `ruby`, `erlang`→`elixir`,
//!    `rust`/`cpp`/`c`→`rust`) or `process.runtime.name` (`cpython`/`pypy`→`python`,
//!    `nodejs`/`node`→`node`, `go`/`gc`→`go`, names with `java`/`jdk`/`hotspot`→`java`,
//!    `.net`/`dotnet`→`csharp`, `ruby`/`jruby`→`ruby`, `php`, `beam`/`erlang`→`elixir`);
//! 3. else `rust` if any sample has native frames;
//! 4. else `other`.
//!
//! Frame `platform` is set only when the frame's runtime maps to a different platform than the
//! chunk's. Trade-off: Sentry (vroomrs `Frame::set_in_app`) honours an explicit `in_app` only
//! when the frame platform is unset or equals the chunk platform, so on foreign frames Sentry
//! recomputes `in_app` with its own heuristics (false for `native` frames); in exchange, frames
//! keep their true language in the UI.

/// The runtime a frame comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Runtime {
    /// No `profile.frame.type`: follows the chunk.
    Unspecified,
    /// Native (ELF) code.
    Native,
    /// Linux kernel.
    Kernel,
    /// Rust (semconv value; the eBPF profiler says `native`).
    Rust,
    /// An interpreter the producer could not identify.
    UnknownInterpreter,
    /// Unwinding aborted.
    AbortMarker,
    /// HotSpot JVM.
    Jvm,
    /// CPython.
    CPython,
    /// V8 (Node.js).
    V8js,
    /// Go.
    Go,
    /// .NET.
    Dotnet,
    /// PHP.
    Php,
    /// Ruby.
    Ruby,
    /// Perl.
    Perl,
    /// Erlang BEAM.
    Beam,
    /// LuaJIT.
    LuaJit,
}

impl Runtime {
    /// Number of variants (for counting arrays).
    pub(crate) const COUNT: usize = 16;

    /// Managed runtimes in tie-break order.
    pub(crate) const MANAGED: [Runtime; 10] = [
        Runtime::Jvm,
        Runtime::CPython,
        Runtime::V8js,
        Runtime::Go,
        Runtime::Dotnet,
        Runtime::Php,
        Runtime::Ruby,
        Runtime::Perl,
        Runtime::Beam,
        Runtime::LuaJit,
    ];

    /// Index for counting arrays.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Runtime from a `profile.frame.type` value.
    pub(crate) fn from_frame_type(s: &str) -> Runtime {
        match s {
            "native" => Runtime::Native,
            "kernel" => Runtime::Kernel,
            "rust" => Runtime::Rust,
            "unknown" => Runtime::UnknownInterpreter,
            "abort-marker" => Runtime::AbortMarker,
            "jvm" => Runtime::Jvm,
            "cpython" => Runtime::CPython,
            "v8js" => Runtime::V8js,
            "go" => Runtime::Go,
            "dotnet" => Runtime::Dotnet,
            "php" | "phpjit" => Runtime::Php,
            "ruby" => Runtime::Ruby,
            "perl" => Runtime::Perl,
            "beam" => Runtime::Beam,
            "luajit" => Runtime::LuaJit,
            _ => Runtime::Unspecified,
        }
    }

    /// True for native code of any kind (native, kernel, rust, unknown, abort marker).
    pub(crate) fn is_native_family(self) -> bool {
        matches!(
            self,
            Runtime::Native
                | Runtime::Kernel
                | Runtime::Rust
                | Runtime::UnknownInterpreter
                | Runtime::AbortMarker
        )
    }

    /// True for interpreted/managed runtimes.
    pub(crate) fn is_managed(self) -> bool {
        !self.is_native_family() && self != Runtime::Unspecified
    }

    /// The Sentry chunk platform for a process dominated by this runtime.
    pub(crate) fn chunk_platform(self) -> &'static str {
        match self {
            Runtime::Native
            | Runtime::Kernel
            | Runtime::Rust
            | Runtime::UnknownInterpreter
            | Runtime::AbortMarker => "rust",
            Runtime::Jvm => "java",
            Runtime::CPython => "python",
            Runtime::V8js => "node",
            Runtime::Go => "go",
            Runtime::Dotnet => "csharp",
            Runtime::Php => "php",
            Runtime::Ruby => "ruby",
            Runtime::Perl => "perl",
            Runtime::Beam => "elixir",
            Runtime::LuaJit | Runtime::Unspecified => "other",
        }
    }

    /// The frame `platform` written when this runtime is foreign to the chunk.
    pub(crate) fn frame_platform(self) -> &'static str {
        if self.is_native_family() {
            "native"
        } else {
            self.chunk_platform()
        }
    }
}

/// The `platform` to write on a frame of `runtime` in a chunk of `chunk_platform`.
pub(crate) fn frame_platform(runtime: Runtime, chunk_platform: &str) -> Option<&'static str> {
    if runtime == Runtime::Unspecified || runtime.chunk_platform() == chunk_platform {
        None
    } else {
        Some(runtime.frame_platform())
    }
}

/// Platform hint from `telemetry.sdk.language`.
pub(crate) fn hint_from_sdk_language(lang: &str) -> Option<&'static str> {
    Some(match lang.trim().to_ascii_lowercase().as_str() {
        "java" => "java",
        "python" => "python",
        "nodejs" | "node" => "node",
        "webjs" | "js" | "javascript" => "javascript",
        "go" => "go",
        "dotnet" => "csharp",
        "php" => "php",
        "ruby" => "ruby",
        "erlang" | "elixir" => "elixir",
        "perl" => "perl",
        "rust" | "cpp" | "c" => "rust",
        _ => return None,
    })
}

/// Platform hint from `process.runtime.name`.
pub(crate) fn hint_from_runtime_name(name: &str) -> Option<&'static str> {
    let n = name.trim().to_ascii_lowercase();
    Some(match n.as_str() {
        "cpython" | "pypy" | "python" => "python",
        "nodejs" | "node" | "node.js" => "node",
        "go" | "gc" | "gccgo" => "go",
        "ruby" | "jruby" | "truffleruby" => "ruby",
        "php" => "php",
        "beam" | "erlang" => "elixir",
        ".net" | "dotnet" | ".net core" | ".net framework" => "csharp",
        _ if n.contains("java") || n.contains("jdk") || n.contains("hotspot") => "java",
        _ => return None,
    })
}

/// Chooses the chunk platform from per-runtime sample counts and the attribute hint (see the
/// module docs).
pub(crate) fn choose_platform(
    counts: &[u64; Runtime::COUNT],
    hint: Option<&'static str>,
) -> &'static str {
    let mut best: Option<(Runtime, u64)> = None;
    for r in Runtime::MANAGED {
        let c = counts[r.index()];
        if c > 0 && best.is_none_or(|(_, b)| c > b) {
            best = Some((r, c));
        }
    }
    if let Some((r, _)) = best {
        return r.chunk_platform();
    }
    if let Some(h) = hint {
        return h;
    }
    if counts[Runtime::Native.index()] > 0 {
        return "rust";
    }
    "other"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_count_matches() {
        assert_eq!(Runtime::LuaJit.index() + 1, Runtime::COUNT);
    }

    #[test]
    fn dominant_runtime() {
        let mut c = [0u64; Runtime::COUNT];
        c[Runtime::Native.index()] = 100;
        assert_eq!(choose_platform(&c, None), "rust");
        assert_eq!(choose_platform(&c, Some("python")), "python");
        c[Runtime::Jvm.index()] = 3;
        assert_eq!(choose_platform(&c, Some("python")), "java");
        c[Runtime::Go.index()] = 3;
        assert_eq!(choose_platform(&c, None), "java");
        c[Runtime::Go.index()] = 4;
        assert_eq!(choose_platform(&c, None), "go");
        assert_eq!(choose_platform(&[0; Runtime::COUNT], None), "other");
    }

    #[test]
    fn frame_platform_only_when_foreign() {
        assert_eq!(frame_platform(Runtime::Kernel, "rust"), None);
        assert_eq!(frame_platform(Runtime::Kernel, "java"), Some("native"));
        assert_eq!(frame_platform(Runtime::Jvm, "java"), None);
        assert_eq!(frame_platform(Runtime::Go, "rust"), Some("go"));
        assert_eq!(frame_platform(Runtime::Unspecified, "rust"), None);
    }

    #[test]
    fn hints() {
        assert_eq!(hint_from_sdk_language("nodejs"), Some("node"));
        assert_eq!(hint_from_sdk_language("dotnet"), Some("csharp"));
        assert_eq!(hint_from_sdk_language("swift"), None);
        assert_eq!(
            hint_from_runtime_name("OpenJDK Runtime Environment"),
            Some("java")
        );
        assert_eq!(hint_from_runtime_name("CPython"), Some("python"));
    }
}
