//! Frame normalization before call trees are built, as Sentry's chunk normalization does it
//! (vroom `SampleChunk.Normalize`, vroomrs `ProfileChunk::normalize`): every frame gets the
//! chunk platform when it has none, `in_app` is decided by per-platform rules unless the SDK
//! set it on a frame of the chunk's own platform, and Python's `<string>`/`<module>` root
//! frame is trimmed from stacks.
//!
//! The rules are re-implemented from the behaviour documented in
//! `shared/notes/sentry-ingestion.md` §6 and the vroom/vroomrs sources; the Python standard
//! library module list is CPython 3.11's `sys.stdlib_module_names`.

use profilink_proto::sentry::{Frame, ProfileChunk};

/// Applies Sentry's normalization to `chunk` in place: frame platforms, `in_app` and Python
/// `<module>` trimming.
pub fn normalize_chunk(chunk: &mut ProfileChunk) {
    let platform = chunk.platform.clone();
    for frame in &mut chunk.profile.frames {
        let frame = std::sync::Arc::make_mut(frame);
        if frame.platform.is_none() {
            frame.platform = Some(platform.as_str().into());
        }
        set_in_app(frame, &platform);
    }
    if platform == "python" {
        trim_python_stacks(chunk);
    }
}

/// Keeps an explicit `in_app` only when the frame's platform is the chunk's; otherwise applies
/// the platform's rule (and `false` for platforms without one).
fn set_in_app(frame: &mut Frame, chunk_platform: &str) {
    let frame_platform = frame.platform.as_deref().unwrap_or_default().to_string();
    if frame.in_app.is_some() && frame_platform == chunk_platform {
        return;
    }
    let is_app = match frame_platform.as_str() {
        "node" => is_node_app(frame),
        "javascript" => is_javascript_app(frame),
        "cocoa" => is_cocoa_app(frame),
        "rust" => is_rust_app(frame),
        "python" => is_python_app(frame),
        "php" => is_php_app(frame),
        "java" | "native" | "android" if chunk_platform == "android" => {
            frame.in_app.unwrap_or(false)
        }
        _ => false,
    };
    frame.in_app = Some(is_app);
}

fn is_node_app(f: &Frame) -> bool {
    f.abs_path
        .as_deref()
        .is_none_or(|p| !p.starts_with("node:") && !p.contains("node_modules"))
}

/// `node_modules` anywhere, or a browser extension scheme at the start.
fn is_js_system_path(p: &str) -> bool {
    p.contains("node_modules")
        || p.starts_with("@moz-extension")
        || p.starts_with("chrome-extension")
}

fn is_javascript_app(f: &Frame) -> bool {
    if f.function.as_deref().is_some_and(|n| n.starts_with('[')) {
        return false;
    }
    if f.filename.as_deref().is_some_and(is_js_system_path) {
        return false;
    }
    f.abs_path
        .as_deref()
        .is_none_or(|p| p.is_empty() || !is_js_system_path(p))
}

fn is_cocoa_app(f: &Frame) -> bool {
    let mp = crate::fingerprint::module_or_package(f);
    if mp == "Sentry" || mp == "hermes" {
        return false;
    }
    f.package.as_deref().is_some_and(|p| {
        p.starts_with("/private/var/containers")
            || p.starts_with("/var/containers")
            || p.contains("/Developer/Xcode/DerivedData")
            || p.contains("/data/Containers/Bundle/Application")
            || p.contains(".app")
    })
}

fn is_rust_app(f: &Frame) -> bool {
    f.package.as_deref().is_some_and(|p| {
        !p.contains("/library/std/src/")
            && !p.starts_with("/usr/lib/system/")
            && !p.starts_with("/rustc/")
            && !p.starts_with("/usr/local/rustup/")
            && !p.starts_with("/usr/local/cargo/")
    })
}

fn is_python_app(f: &Frame) -> bool {
    if let Some(p) = f.abs_path.as_deref()
        && (p.contains("/site-packages/")
            || p.contains("/dist-packages/")
            || p.contains("\\site-packages\\")
            || p.contains("\\dist-packages\\")
            || p.starts_with("/usr/local/"))
    {
        return false;
    }
    if let Some(module) = f.module.as_deref() {
        let top = module.split('.').next().unwrap_or_default();
        if top == "sentry_sdk" {
            return false;
        }
        return PYTHON_STDLIB.binary_search(&top).is_err();
    }
    true
}

fn is_php_app(f: &Frame) -> bool {
    f.abs_path
        .as_deref()
        .is_none_or(|p| !p.contains("/vendor/"))
}

/// Drops the `<string>`/`<module>` frame from the root end of every stack.
fn trim_python_stacks(chunk: &mut ProfileChunk) {
    let Some(module_frame) = chunk.profile.frames.iter().position(|f| {
        f.filename.as_deref() == Some("<string>") && f.function.as_deref() == Some("<module>")
    }) else {
        return;
    };
    for stack in &mut chunk.profile.stacks {
        if stack.last() == Some(&module_frame) {
            stack.pop();
        }
    }
}

/// CPython 3.11 `sys.stdlib_module_names`, sorted (for binary search).
static PYTHON_STDLIB: &[&str] = &[
    "__future__",
    "_abc",
    "_aix_support",
    "_ast",
    "_asyncio",
    "_bisect",
    "_blake2",
    "_bootsubprocess",
    "_bz2",
    "_codecs",
    "_codecs_cn",
    "_codecs_hk",
    "_codecs_iso2022",
    "_codecs_jp",
    "_codecs_kr",
    "_codecs_tw",
    "_collections",
    "_collections_abc",
    "_compat_pickle",
    "_compression",
    "_contextvars",
    "_crypt",
    "_csv",
    "_ctypes",
    "_curses",
    "_curses_panel",
    "_datetime",
    "_dbm",
    "_decimal",
    "_elementtree",
    "_frozen_importlib",
    "_frozen_importlib_external",
    "_functools",
    "_gdbm",
    "_hashlib",
    "_heapq",
    "_imp",
    "_io",
    "_json",
    "_locale",
    "_lsprof",
    "_lzma",
    "_markupbase",
    "_md5",
    "_msi",
    "_multibytecodec",
    "_multiprocessing",
    "_opcode",
    "_operator",
    "_osx_support",
    "_overlapped",
    "_pickle",
    "_posixshmem",
    "_posixsubprocess",
    "_py_abc",
    "_pydecimal",
    "_pyio",
    "_queue",
    "_random",
    "_scproxy",
    "_sha1",
    "_sha256",
    "_sha3",
    "_sha512",
    "_signal",
    "_sitebuiltins",
    "_socket",
    "_sqlite3",
    "_sre",
    "_ssl",
    "_stat",
    "_statistics",
    "_string",
    "_strptime",
    "_struct",
    "_symtable",
    "_thread",
    "_threading_local",
    "_tkinter",
    "_tokenize",
    "_tracemalloc",
    "_typing",
    "_uuid",
    "_warnings",
    "_weakref",
    "_weakrefset",
    "_winapi",
    "_zoneinfo",
    "abc",
    "aifc",
    "antigravity",
    "argparse",
    "array",
    "ast",
    "asynchat",
    "asyncio",
    "asyncore",
    "atexit",
    "audioop",
    "base64",
    "bdb",
    "binascii",
    "bisect",
    "builtins",
    "bz2",
    "cProfile",
    "calendar",
    "cgi",
    "cgitb",
    "chunk",
    "cmath",
    "cmd",
    "code",
    "codecs",
    "codeop",
    "collections",
    "colorsys",
    "compileall",
    "concurrent",
    "configparser",
    "contextlib",
    "contextvars",
    "copy",
    "copyreg",
    "crypt",
    "csv",
    "ctypes",
    "curses",
    "dataclasses",
    "datetime",
    "dbm",
    "decimal",
    "difflib",
    "dis",
    "distutils",
    "doctest",
    "email",
    "encodings",
    "ensurepip",
    "enum",
    "errno",
    "faulthandler",
    "fcntl",
    "filecmp",
    "fileinput",
    "fnmatch",
    "fractions",
    "ftplib",
    "functools",
    "gc",
    "genericpath",
    "getopt",
    "getpass",
    "gettext",
    "glob",
    "graphlib",
    "grp",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http",
    "idlelib",
    "imaplib",
    "imghdr",
    "imp",
    "importlib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "keyword",
    "lib2to3",
    "linecache",
    "locale",
    "logging",
    "lzma",
    "mailbox",
    "mailcap",
    "marshal",
    "math",
    "mimetypes",
    "mmap",
    "modulefinder",
    "msilib",
    "msvcrt",
    "multiprocessing",
    "netrc",
    "nis",
    "nntplib",
    "nt",
    "ntpath",
    "nturl2path",
    "numbers",
    "opcode",
    "operator",
    "optparse",
    "os",
    "ossaudiodev",
    "pathlib",
    "pdb",
    "pickle",
    "pickletools",
    "pipes",
    "pkgutil",
    "platform",
    "plistlib",
    "poplib",
    "posix",
    "posixpath",
    "pprint",
    "profile",
    "pstats",
    "pty",
    "pwd",
    "py_compile",
    "pyclbr",
    "pydoc",
    "pydoc_data",
    "pyexpat",
    "queue",
    "quopri",
    "random",
    "re",
    "readline",
    "reprlib",
    "resource",
    "rlcompleter",
    "runpy",
    "sched",
    "secrets",
    "select",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "site",
    "smtpd",
    "smtplib",
    "sndhdr",
    "socket",
    "socketserver",
    "spwd",
    "sqlite3",
    "sre_compile",
    "sre_constants",
    "sre_parse",
    "ssl",
    "stat",
    "statistics",
    "string",
    "stringprep",
    "struct",
    "subprocess",
    "sunau",
    "symtable",
    "sys",
    "sysconfig",
    "syslog",
    "tabnanny",
    "tarfile",
    "telnetlib",
    "tempfile",
    "termios",
    "textwrap",
    "this",
    "threading",
    "time",
    "timeit",
    "tkinter",
    "token",
    "tokenize",
    "tomllib",
    "trace",
    "traceback",
    "tracemalloc",
    "tty",
    "turtle",
    "turtledemo",
    "types",
    "typing",
    "unicodedata",
    "unittest",
    "urllib",
    "uu",
    "uuid",
    "venv",
    "warnings",
    "wave",
    "weakref",
    "webbrowser",
    "winreg",
    "winsound",
    "wsgiref",
    "xdrlib",
    "xml",
    "xmlrpc",
    "zipapp",
    "zipfile",
    "zipimport",
    "zlib",
    "zoneinfo",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdlib_list_is_sorted() {
        assert!(PYTHON_STDLIB.windows(2).all(|w| w[0] < w[1]));
        assert!(PYTHON_STDLIB.binary_search(&"threading").is_ok());
    }

    #[test]
    fn python_rules() {
        let mut chunk = ProfileChunk {
            platform: "python".into(),
            ..Default::default()
        };
        chunk.profile.frames = vec![
            std::sync::Arc::new(Frame {
                module: Some("threading".into()),
                abs_path: Some("/opt/app/threading.py".into()),
                ..Default::default()
            }),
            std::sync::Arc::new(Frame {
                module: Some("app.views".into()),
                abs_path: Some("/srv/app/views.py".into()),
                ..Default::default()
            }),
            std::sync::Arc::new(Frame {
                module: Some("app.views".into()),
                abs_path: Some("/usr/local/lib/python3.11/site-packages/x.py".into()),
                ..Default::default()
            }),
            std::sync::Arc::new(Frame {
                module: Some("app".into()),
                in_app: Some(false),
                ..Default::default()
            }),
            std::sync::Arc::new(Frame {
                filename: Some("<string>".into()),
                function: Some("<module>".into()),
                ..Default::default()
            }),
        ];
        chunk.profile.stacks = vec![vec![1, 0, 4], vec![4, 1]];
        normalize_chunk(&mut chunk);
        let in_app: Vec<_> = chunk.profile.frames.iter().map(|f| f.in_app).collect();
        assert_eq!(
            in_app,
            vec![
                Some(false),
                Some(true),
                Some(false),
                Some(false),
                Some(true)
            ]
        );
        assert_eq!(chunk.profile.stacks, vec![vec![1, 0], vec![4, 1]]);
    }

    #[test]
    fn foreign_platform_frames_use_rules_and_unknown_platforms_are_system() {
        let mut chunk = ProfileChunk {
            platform: "go".into(),
            ..Default::default()
        };
        chunk.profile.frames = vec![
            std::sync::Arc::new(Frame::default()),
            std::sync::Arc::new(Frame {
                in_app: Some(true),
                ..Default::default()
            }),
            std::sync::Arc::new(Frame {
                in_app: Some(true),
                platform: Some("rust".into()),
                package: Some("/rustc/abc/library/std/src/rt.rs".into()),
                ..Default::default()
            }),
        ];
        normalize_chunk(&mut chunk);
        let in_app: Vec<_> = chunk.profile.frames.iter().map(|f| f.in_app).collect();
        assert_eq!(in_app, vec![Some(false), Some(true), Some(false)]);
    }
}
