//! The README's five-minute walk runs as written, and its crate table matches the workspace.
//!
//! The walk's shell blocks are marked in the README: `<!-- walk:serve ... -->` before the
//! block that starts profilink (kept running), `<!-- walk:run -->` before each block whose
//! commands are then run in order, each through `sh -c`, in a fresh directory holding links to
//! `examples/` and `tests/` (the walk runs from the repository's root). Rewrites, so the test
//! runs the README's commands against this build on free ports:
//! * `cargo run --release -- ARGS` is the real binary (`CARGO_BIN_EXE_profilink`) with `ARGS`;
//! * `cargo run --release --example NAME -- ARGS` is `cargo run --locked --example NAME -- ARGS` on this
//!   workspace (the test's own profile: a release build would take minutes);
//! * the walk's default addresses become free ports, also passed in the environment variables
//!   `examples/walk.yaml` and `send_otlp` read.
//!
//! A command that fails is retried for a while (the envelopes appear a second after the
//! profile arrives); one that still fails fails the test with its output.

mod service_support;

use service_support::{Profilink, free_addr};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const README: &str = include_str!("../README.md");

/// The walk's addresses (`examples/walk.yaml` defaults) and the variables that move them.
const ADDRESSES: [(&str, &str); 5] = [
    ("PROFILINK_OTLP_GRPC_ENDPOINT", "127.0.0.1:4317"),
    ("PROFILINK_OTLP_HTTP_ENDPOINT", "127.0.0.1:4318"),
    ("PROFILINK_SENTRY_ENDPOINT", "127.0.0.1:9000"),
    ("PROFILINK_FLAMEGRAPH_ENDPOINT", "127.0.0.1:8080"),
    ("PROFILINK_METRICS_ADDRESS", "127.0.0.1:8888"),
];

/// How long a failing command is retried.
const RETRY_FOR: Duration = Duration::from_secs(30);

/// The first fenced block after byte `from`: its lines.
fn block_after(text: &str, from: usize) -> Vec<String> {
    let rest = &text[from..];
    let open = rest.find("```").expect("a fenced block after the marker");
    let body = &rest[open..];
    let body = &body[body.find('\n').expect("fence line") + 1..];
    let close = body.find("```").expect("closing fence");
    body[..close].lines().map(str::to_owned).collect()
}

/// The commands of a block: non-empty lines that are not comments.
fn commands(block: &[String]) -> Vec<String> {
    block
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// The walk: the serve command and the run blocks' commands, in README order.
fn walk(readme: &str) -> (String, Vec<String>) {
    let serve = readme
        .find("<!-- walk:serve")
        .expect("a <!-- walk:serve --> marker in the README");
    let serve = commands(&block_after(readme, serve));
    assert_eq!(serve.len(), 1, "one serve command: {serve:?}");
    let mut steps = Vec::new();
    let mut at = 0;
    while let Some(i) = readme[at..].find("<!-- walk:run -->") {
        steps.extend(commands(&block_after(readme, at + i)));
        at += i + 1;
    }
    assert!(
        !steps.is_empty(),
        "no <!-- walk:run --> blocks in the README"
    );
    (serve[0].clone(), steps)
}

/// A README command as this test runs it (see the module docs).
fn rewrite(cmd: &str, addrs: &[(&str, &str, String)]) -> String {
    let mut cmd = cmd.to_string();
    for (_, default, free) in addrs {
        cmd = cmd.replace(default, free);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let cmd = cmd
        .replace(
            "cargo run --release --example ",
            &format!(
                "'{}' run --quiet --locked --manifest-path '{}' --example ",
                env!("CARGO"),
                manifest.display()
            ),
        )
        .replace(
            "cargo run --release --",
            &format!("'{}'", env!("CARGO_BIN_EXE_profilink")),
        );
    assert!(
        !cmd.starts_with("cargo ") && !cmd.contains(" cargo "),
        "a cargo command this test cannot run: {cmd}"
    );
    cmd
}

/// Runs `cmd` in `dir` until it succeeds (or [`RETRY_FOR`] ran out); its output.
fn run_step(cmd: &str, dir: &Path, env: &[(&str, String)], p: &Profilink) -> String {
    let started = Instant::now();
    loop {
        let out = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            return text;
        }
        assert!(
            started.elapsed() < RETRY_FOR,
            "README walk command failed ({}): {cmd}\n{text}\nprofilink's log:\n{}",
            out.status,
            p.stderr()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn readme_walk_runs_as_written() {
    let (serve, steps) = walk(README);
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for linked in ["examples", "tests"] {
        std::os::unix::fs::symlink(root.join(linked), dir.path().join(linked)).unwrap();
    }
    let addrs: Vec<(&str, &str, String)> = ADDRESSES
        .iter()
        .map(|(var, default)| (*var, *default, free_addr()))
        .collect();
    let env: Vec<(&str, String)> = addrs.iter().map(|(v, _, a)| (*v, a.clone())).collect();

    let args = serve
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| panic!("the walk starts profilink with cargo run: {serve}"));
    let args: Vec<&str> = args.split_whitespace().collect();
    let env_opt: Vec<(&str, Option<&str>)> = env
        .iter()
        .map(|(k, v)| (*k, Some(v.as_str())))
        .chain([("PROFILINK_DATA_DIR", None), ("SENTRY_DSN", None)])
        .collect();
    let mut p = Profilink::start(dir.path(), &args, &env_opt);
    for (var, _, addr) in &addrs {
        if *var != "PROFILINK_METRICS_ADDRESS" {
            p.wait_port(addr, Duration::from_secs(20));
        }
    }

    let mut last = String::new();
    for cmd in &steps {
        let cmd = rewrite(cmd, &addrs);
        last = run_step(&cmd, dir.path(), &env, &p);
        println!("$ {cmd}\n{last}");
    }
    // The walk ends at the viewer's summary of what it stored.
    assert!(last.contains(" chunks · "), "{last}");
    assert!(
        std::fs::read_dir(dir.path().join("profilink-data"))
            .unwrap()
            .any(|e| e
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "envelope")),
        "envelopes in ./profilink-data/"
    );

    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "exit {status:?}:\n{}", p.stderr());
    assert!(p.stderr().contains("run summary"), "{}", p.stderr());
}

#[test]
fn crate_table_matches_the_workspace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members_line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("workspace members");
    let mut members: Vec<String> = members_line
        .split('"')
        .skip(1)
        .step_by(2)
        .map(|m| format!("{m}/"))
        .collect();
    members.push("src/".into());
    members.sort();

    let at = README
        .find("<!-- crates:")
        .expect("a <!-- crates: --> marker before the crate table");
    let rows: Vec<(String, String)> = README[at..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(|c| c.trim().trim_matches('`')).collect();
            (cells[1].to_string(), cells[2].to_string())
        })
        .collect();
    let mut dirs: Vec<String> = rows.iter().map(|(_, d)| d.clone()).collect();
    dirs.sort();
    assert_eq!(
        dirs, members,
        "README crate table dirs vs workspace members"
    );
    for (name, dir) in &rows {
        let toml = match dir.as_str() {
            "src/" => manifest.clone(),
            _ => std::fs::read_to_string(root.join(dir).join("Cargo.toml")).unwrap(),
        };
        assert!(
            toml.contains(&format!("name = \"{name}\"")),
            "{dir} holds crate {name}"
        );
    }
}
