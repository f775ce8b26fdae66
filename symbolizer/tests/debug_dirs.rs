//! Every kind of object, found in a debug directory in the build-id layout, symbolizes as
//! elfutils' `eu-addr2line -f -i -C` resolves it: function, file, line and the whole inline
//! chain, for every address tried (several per function).
//!
//! Objects (built here): gcc PIE and non-PIE, gcc with lld (the toolchain's `rust-lld`), rustc,
//! C++ `-O2` with templates and inlined functions, a stripped binary whose debug file sits in
//! the build-id directory, and a shared library with only `.dynsym`. x86_64 Linux.

mod support;

use profilink_symbolizer::{Outcome, SourceKind, Symbolizer, SymbolizerConfig};
use support::*;

#[test]
#[cfg_attr(
    not(all(target_os = "linux", target_arch = "x86_64")),
    ignore = "x86_64 Linux ELF"
)]
fn every_object_kind_matches_eu_addr2line() {
    if !tools_present("debug_dirs", &["gcc", "g++", "eu-addr2line", "objcopy"]) {
        return;
    }
    let dir = scratch("debug-dirs");
    let built = build_all(dir.path());
    let debug_dir = dir.path().join("debug");
    for b in &built {
        install_build_id(&debug_dir, b);
    }
    let sym = Symbolizer::new(SymbolizerConfig {
        sources: vec![SourceKind::DebugDirs],
        debug_dirs: vec![debug_dir.clone()],
        ..Default::default()
    });

    let mut dict = Dict::new();
    let mut plan = Vec::new();
    for b in &built {
        let data = std::fs::read(&b.object).unwrap();
        let addrs = addresses(b, 12);
        assert!(!addrs.is_empty(), "{}", b.name);
        let expected = eu_addr2line(&b.debug, &addrs);
        let raw = eu_addr2line_with(&b.debug, &addrs, false);
        let m = dict.mapping(&b.name, &data, true);
        let locs = dict.locations(m, &addrs);
        plan.push((b, addrs, locs, expected, raw));
    }
    let all: Vec<i32> = plan.iter().flat_map(|p| p.2.iter().copied()).collect();
    let mut req = request(dict, &[(4242, all)]);
    let summary = sym.symbolize_request(&mut req);
    let d = req.dictionary.as_ref().unwrap();

    let mut report = Vec::new();
    let mut failures = Vec::new();
    let mut demangler = Vec::new();
    let mut inlined = 0;
    let mut frames = 0;
    for (b, addrs, locs, expected, raw) in &plan {
        let c = compare(&b.name, d, locs, addrs, expected, raw, b.only.is_some());
        inlined += expected.iter().filter(|e| e.len() > 1).count();
        frames += c.frames;
        report.push(format!(
            "{}: {} addresses, {} frames",
            b.name,
            addrs.len(),
            c.frames
        ));
        failures.extend(c.mismatches);
        demangler.extend(c.demangler_differences);
    }
    eprintln!(
        "debug_dirs: {} ({inlined} addresses with inline chains; {} of {frames} frames demangled differently from libiberty)",
        report.join(", "),
        demangler.len()
    );
    for d in &demangler {
        eprintln!("  demangler: {d}");
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        demangler.len() * 20 <= frames,
        "demangling differs too often"
    );
    assert!(inlined > 10, "the C++ -O2 binary has inline chains");
    let m = sym.metrics();
    assert_eq!(m.frames(Outcome::Symbolized), summary.symbolized);
    assert!(summary.symbolized > 100, "{summary:?}");
    // Every symbolized location is marked.
    let marker = d.attribute_table.iter().position(|a| {
        d.string_table[a.key_strindex as usize] == profilink_symbolizer::SYMBOLIZED_KEY
    });
    let marker = marker.expect("marker attribute") as i32;
    for loc in &d.location_table[1..] {
        assert_eq!(
            !loc.lines.is_empty(),
            loc.attribute_indices.contains(&marker)
        );
        assert_ne!(loc.address, 0, "the address stays");
        assert_ne!(loc.mapping_index, 0, "the mapping stays");
    }
}
