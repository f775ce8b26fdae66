//! debuginfod: a real `debuginfod` server (Debian's package) on loopback serves a stripped
//! binary's debug file; the symbolizer downloads it in the background into its disk cache and
//! names every frame as `eu-addr2line` does with the debug file. A second symbolizer (fresh
//! memory, same cache) is served from the cache with the server gone. With the server down and
//! an empty cache the frames stay addresses within the wait budget and are counted
//! (`fetch_failed`); with a server that accepts and never answers they are counted `timeout`,
//! again within the budget.

mod support;

use profilink_symbolizer::{Outcome, SourceKind, Symbolizer, SymbolizerConfig};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn config(url: &str, cache: &Path, wait: Duration) -> SymbolizerConfig {
    let mut cfg = SymbolizerConfig {
        sources: vec![SourceKind::Debuginfod],
        debug_dirs: vec![],
        wait,
        ..Default::default()
    };
    cfg.debuginfod.urls = Some(vec![url.to_owned()]);
    cfg.debuginfod.cache_dir = Some(cache.to_path_buf());
    cfg.debuginfod.timeout = Duration::from_secs(20);
    cfg
}

#[test]
#[cfg_attr(
    not(all(target_os = "linux", target_arch = "x86_64")),
    ignore = "x86_64 Linux ELF"
)]
fn debug_info_from_a_real_debuginfod_then_from_the_cache() {
    if !tools_present(
        "debuginfod",
        &["gcc", "eu-addr2line", "objcopy", "debuginfod"],
    ) {
        return;
    }
    let dir = scratch("debuginfod");
    let c = dir.path().join("app.c");
    std::fs::write(&c, C_SOURCE).unwrap();
    let b = stripped(dir.path(), &c);
    let serve = dir.path().join("serve");
    std::fs::create_dir_all(&serve).unwrap();
    std::fs::copy(&b.debug, serve.join("app.debug")).unwrap();
    let id = hex::encode(build_id(&std::fs::read(&b.object).unwrap()));

    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let server = Server(
        Command::new("debuginfod")
            .args(["-F", "-p", &port.to_string(), "-t", "0", "-g", "0", "-d"])
            .arg(dir.path().join("db.sqlite"))
            .arg(&serve)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Wait until it has scanned the directory and serves the build id.
    let probe = reqwest::blocking::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ok = probe
            .get(format!("{url}/buildid/{id}/debuginfo"))
            .send()
            .is_ok_and(|r| r.status().is_success());
        if ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "debuginfod did not serve {id} in 60 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let b = Built {
        only: Some("work_"),
        ..b
    };
    let addrs = addresses(&b, 8);
    let expected = eu_addr2line(&b.debug, &addrs);
    let raw = eu_addr2line_with(&b.debug, &addrs, false);
    let mut dict = Dict::new();
    let m = dict.mapping("gcc-stripped", &std::fs::read(&b.object).unwrap(), true);
    let locs = dict.locations(m, &addrs);
    let req = request(dict, &[(1, locs.clone())]);
    let cache = dir.path().join("cache");

    // 1. From the server, within the wait.
    let sym = Symbolizer::new(config(&url, &cache, Duration::from_secs(30)));
    let mut r = req.clone();
    let s = sym.symbolize_request(&mut r);
    let c = compare(
        "served",
        r.dictionary.as_ref().unwrap(),
        &locs,
        &addrs,
        &expected,
        &raw,
        false,
    );
    assert!(c.mismatches.is_empty(), "{:#?}", c.mismatches);
    assert_eq!(s.symbolized, addrs.len() as u64, "{s:?}");
    let m = sym.metrics();
    assert_eq!(
        profilink_symbolizer::SymbolizerMetrics::get(&m.debuginfod_fetches_ok),
        1
    );
    assert!(profilink_symbolizer::SymbolizerMetrics::get(&m.debuginfod_bytes) > 1000);
    drop(server);

    // 2. Server gone: a fresh symbolizer is served from the disk cache.
    let sym = Symbolizer::new(config(&url, &cache, Duration::from_secs(5)));
    let mut r = req.clone();
    let s = sym.symbolize_request(&mut r);
    let c = compare(
        "cached",
        r.dictionary.as_ref().unwrap(),
        &locs,
        &addrs,
        &expected,
        &raw,
        false,
    );
    assert!(c.mismatches.is_empty(), "{:#?}", c.mismatches);
    assert_eq!(s.symbolized, addrs.len() as u64);
    let m = sym.metrics();
    assert_eq!(
        profilink_symbolizer::SymbolizerMetrics::get(&m.debuginfod_fetches_ok),
        0
    );

    // 3. Server down, empty cache: addresses stay, within the budget, counted.
    let wait = Duration::from_secs(2);
    let sym = Symbolizer::new(config(&url, &dir.path().join("empty"), wait));
    let mut r = req.clone();
    let t0 = Instant::now();
    let s = sym.symbolize_request(&mut r);
    assert!(
        t0.elapsed() < wait + Duration::from_secs(1),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(s.symbolized, 0);
    assert_eq!(
        sym.metrics().frames(Outcome::FetchFailed),
        addrs.len() as u64,
        "{s:?}"
    );
    let d = r.dictionary.as_ref().unwrap();
    assert!(
        locs.iter()
            .all(|&l| d.location_table[l as usize].lines.is_empty())
    );

    // 4. A server that accepts and never answers: `timeout`, within the budget.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let hold = std::thread::spawn(move || {
        let conns: Vec<_> = silent.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(3));
        drop(conns);
    });
    let wait = Duration::from_millis(500);
    let sym = Symbolizer::new(config(&silent_url, &dir.path().join("empty2"), wait));
    let mut r = req.clone();
    let t0 = Instant::now();
    let s = sym.symbolize_request(&mut r);
    assert!(
        t0.elapsed() < wait + Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(
        sym.metrics().frames(Outcome::Timeout),
        addrs.len() as u64,
        "{s:?}"
    );
    hold.join().unwrap();
    eprintln!(
        "debuginfod: {} frames named from the server and again from the cache",
        c.frames
    );
}
