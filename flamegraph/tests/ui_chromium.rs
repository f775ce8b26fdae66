//! The viewer in a real headless browser (Debian's `chromium`): a screenshot of `/ui/` with the
//! fixture chunks stored (saved to `target/test-output/flamegraph-ui.png`), and the DOM after
//! load, which must hold inferno's SVG flamegraph of the fixtures.
//!
//! Skipped with a message when `chromium` is not installed, unless
//! `PROFILINK_REQUIRE_CHROMIUM=1` (then it fails). Install: `apt-get install -y chromium`.

mod common;

use common::*;
use profilink_flamegraph::ChunkMeta;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn find_chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser"] {
        for dir in std::env::var("PATH").unwrap_or_default().split(':') {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// `target/` of this build (the test binary lives in `target/<profile>/deps/`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")))
}

/// What a chromium run printed.
struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs chromium headless with the isolating flags plus `extra`, killing it after a minute.
/// Output goes to files, not pipes: chromium's helper processes inherit the descriptors, and a
/// full pipe would block it.
fn run_chromium(bin: &Path, profile: &Path, extra: &[String], url: &str) -> Run {
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    args.extend(extra.iter().cloned());
    args.push(url.to_string());
    std::fs::create_dir_all(profile).unwrap();
    let (out_path, err_path) = (profile.join("stdout.txt"), profile.join("stderr.txt"));
    let mut child = Command::new(bin)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium did not finish within 60 s: {}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Run {
        success: status.success(),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewer_renders_fixture_flamegraph_in_chromium() {
    let Some(chromium) = find_chromium() else {
        if std::env::var("PROFILINK_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
            panic!("chromium is required (PROFILINK_REQUIRE_CHROMIUM=1) but not on PATH");
        }
        eprintln!(
            "skipping the headless-browser test: chromium is not installed (apt-get install -y chromium)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir);
    for chunk in fixture_chunks() {
        let meta = ChunkMeta {
            project_id: 1,
            transaction_names: linked_transactions(&chunk),
            received: 0.0,
        };
        store.insert(&chunk, &meta).unwrap();
    }
    let server = TestServer::start(Arc::clone(&store), None).await;
    let url = format!("{}/ui/", server.base);

    let out_dir = target_dir().join("test-output");
    std::fs::create_dir_all(&out_dir).unwrap();
    let png = out_dir.join("flamegraph-ui.png");
    let _ = std::fs::remove_file(&png);

    let bin = chromium.clone();
    let (profile1, profile2) = (dir.path().join("chromium-1"), dir.path().join("chromium-2"));
    let (shot_url, dom_url, png2) = (url.clone(), url.clone(), png.clone());
    let (shot, dom) = tokio::task::spawn_blocking(move || {
        let shot = run_chromium(
            &bin,
            &profile1,
            &[format!("--screenshot={}", png2.display())],
            &shot_url,
        );
        let dom = run_chromium(&bin, &profile2, &["--dump-dom".to_string()], &dom_url);
        (shot, dom)
    })
    .await
    .unwrap();

    assert!(
        png.is_file(),
        "no screenshot; chromium stderr: {}",
        shot.stderr
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    // A blank 1280x900 page compresses to a few KiB; a drawn flamegraph is far larger.
    assert!(
        bytes.len() > 20_000,
        "screenshot is only {} bytes",
        bytes.len()
    );
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((width, height), (1280, 900));

    let html = &dom.stdout;
    assert!(dom.success, "dump-dom failed: {}", dom.stderr);
    assert!(html.contains("<svg"), "no SVG in the DOM");
    assert!(html.contains("id=\"frames\""), "no inferno frames group");
    assert!(
        html.contains("Thread.run (threading)"),
        "fixture function missing from the SVG"
    );
    assert!(
        html.contains("do_unit (__main__)"),
        "fixture function missing from the SVG"
    );
    assert!(html.contains("2 chunks"), "summary missing");
    eprintln!("screenshot: {}", png.display());
    server.stop().await;
}
