//! Helpers for end-to-end tests that run the real `profilink` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The shared fixtures directory (`tests/fixtures`, copied from the project's shared fixtures).
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// All files under `fixtures()/sub` with the extension `ext`, sorted.
pub fn fixture_files(sub: &str, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(fixtures().join(sub))
        .unwrap_or_else(|e| panic!("fixtures/{sub}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no *.{ext} fixtures in {sub}");
    out
}

/// The result of one run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub raw_stdout: Vec<u8>,
}

impl Run {
    fn from(out: Output) -> Self {
        let run = Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            raw_stdout: out.stdout,
        };
        assert!(
            !run.stderr.contains("panicked"),
            "the binary panicked:\n{}",
            run.stderr
        );
        run
    }
}

/// Runs `profilink ARGS...`.
pub fn profilink<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Run::from(
        Command::new(env!("CARGO_BIN_EXE_profilink"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run profilink"),
    )
}

/// Runs `profilink translate --to sentry --output OUT INPUT`.
pub fn translate_to_sentry(input: &Path, out: &Path) -> Run {
    profilink([
        "translate".as_ref(),
        "--to".as_ref(),
        "sentry".as_ref(),
        "--output".as_ref(),
        out.as_os_str(),
        input.as_os_str(),
    ])
}

/// Writes `bytes` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// True when `python3 -c "import vroomrs"` works; panics when it doesn't but the environment
/// demands it (`PROFILINK_REQUIRE_VROOMRS=1`, set by the test script and CI).
pub fn vroomrs_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import vroomrs"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok && std::env::var("PROFILINK_REQUIRE_VROOMRS").is_ok_and(|v| v == "1") {
        panic!("vroomrs is required (run scripts/setup-test-tools.sh)");
    }
    ok
}
