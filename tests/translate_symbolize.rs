//! `profilink translate --symbolize`: the real binary names the native frames of an
//! eBPF-shaped OTLP file from a debug directory, for `--to otlp` (Location.lines) and `--to
//! sentry` (one frame per inline level, each with the frame's `instruction_addr`), and the
//! chunks pass `profilink validate`. Skips without gcc unless `PROFILINK_REQUIRE_GCC` is set.

#[path = "../symbolizer/tests/support/mod.rs"]
mod support;

use prost::Message;
use std::process::Command;
use support::*;

#[test]
fn translate_symbolize_names_native_frames() {
    if !tools_present(
        "translate_symbolize",
        &["gcc", "g++", "eu-addr2line", "objcopy"],
    ) {
        return;
    }
    let dir = scratch("cli");
    let src = dir.path().join("app.cpp");
    std::fs::write(&src, CPP_SOURCE).unwrap();
    let exe = dir.path().join("cxx-o2");
    run(Command::new("g++")
        .args(["-g", "-O2", "-Wl,--build-id=sha1", "-o"])
        .arg(&exe)
        .arg(&src));
    let b = Built {
        name: "cxx-o2".into(),
        object: exe.clone(),
        debug: exe.clone(),
        separate_debug: false,
        only: Some("run"),
    };
    let debug_dir = dir.path().join("debug");
    install_build_id(&debug_dir, &b);
    let addrs = addresses(&b, 16);
    let expected = eu_addr2line(&exe, &addrs);
    let mut dict = Dict::new();
    let m = dict.mapping("cxx-o2", &std::fs::read(&exe).unwrap(), true);
    let locs = dict.locations(m, &addrs);
    let req = request(dict, &[(4242, locs.clone())]);
    let input = dir.path().join("in.pb");
    std::fs::write(&input, req.encode_to_vec()).unwrap();

    let bin = env!("CARGO_BIN_EXE_profilink");
    let out_pb = dir.path().join("out.pb");
    let o = Command::new(bin)
        .args(["translate", "--to", "otlp", "--symbolize", "--debug-dir"])
        .arg(&debug_dir)
        .arg("--symbol-cache")
        .arg(dir.path().join("cache"))
        .arg("-o")
        .arg(&out_pb)
        .arg(&input)
        .env("DEBUGINFOD_URLS", "")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("symbolized {} native frame(s)", addrs.len())),
        "{stderr}"
    );
    let got = profilink_proto::otlp::ExportProfilesServiceRequest::decode(
        std::fs::read(&out_pb).unwrap().as_slice(),
    )
    .unwrap();
    let d = got.dictionary.as_ref().unwrap();
    let raw = eu_addr2line_with(&exe, &addrs, false);
    let c = compare("cxx-o2", d, &locs, &addrs, &expected, &raw, false);
    assert!(c.mismatches.is_empty(), "{:#?}", c.mismatches);
    assert!(c.frames > addrs.len(), "inline chains expanded");

    // --to sentry: every inline level is a frame with the location's instruction_addr.
    let ndjson = dir.path().join("out.ndjson");
    let o = Command::new(bin)
        .args(["translate", "--to", "sentry", "--symbolize", "--debug-dir"])
        .arg(&debug_dir)
        .arg("--symbol-cache")
        .arg(dir.path().join("cache"))
        .arg("-o")
        .arg(&ndjson)
        .arg(&input)
        .env("DEBUGINFOD_URLS", "")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&ndjson).unwrap();
    let chunk: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let frames = chunk["profile"]["frames"].as_array().unwrap();
    let named = frames.iter().filter(|f| f["function"].is_string()).count();
    assert_eq!(named, frames.len(), "every frame named");
    assert!(frames.iter().all(|f| f["instruction_addr"].is_string()));
    assert!(frames.len() >= c.frames.min(frames.len()));
    assert!(
        chunk["debug_meta"]["images"]
            .as_array()
            .is_some_and(|i| i.len() == 1)
    );
    let v = Command::new(bin)
        .args(["validate"])
        .arg(&ndjson)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
}
