//! The house rule that crates have no import circles, checked on every test run so it holds
//! itself: inside each crate, the top-level modules (the `mod x;` lines of its `lib.rs`) must
//! depend on each other one way only. A failure names each circle and, for every step of it,
//! the first line that makes it.
//!
//! Module `a` depends on module `b` when a non-test file of `a` (`a.rs` or a file under `a/`,
//! not `tests.rs`, not what follows a `#[cfg(test)] mod tests {`) names `crate::b` or
//! `$crate::b`, names `b` inside a `crate::{...}` group, or names through the crate root an
//! item that `lib.rs` re-exports from `b` (`pub use b::Item;` then `crate::Item`). Comments are
//! left out. Paths through `super::` are not followed: they stay inside one module's folder.
//!
//! The crates are the root package (`src/`) and every directory beside it with a
//! `src/lib.rs` (the workspace members).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A dependency of one module on another, with the first line that makes it.
type Edges = BTreeMap<String, BTreeMap<String, String>>;

/// The `mod x;` names of `lib` (file modules only: inline ones are part of `lib.rs`).
fn file_modules(lib: &str) -> BTreeSet<String> {
    let mut mods = BTreeSet::new();
    for line in lib.lines().map(code) {
        let mut words = line.split_whitespace().peekable();
        while let Some(w) = words.peek() {
            if *w == "pub" || w.starts_with("pub(") {
                words.next();
            } else {
                break;
            }
        }
        if words.next() == Some("mod")
            && let Some(name) = words.next().and_then(|n| n.strip_suffix(';'))
        {
            mods.insert(name.to_string());
        }
    }
    mods
}

/// `line` without its `//` comment.
fn code(line: &str) -> &str {
    line.find("//").map_or(line, |i| &line[..i])
}

/// The identifiers of `text`, in order.
fn idents(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
        })
        .collect()
}

/// Root names `lib` re-exports from one of `mods` (`pub use m::a::{B, c}` gives `B` and `c`).
fn root_names(lib: &str, mods: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let text: String = lib.lines().map(code).collect::<Vec<_>>().join("\n");
    for stmt in text.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, path)) = rest.split_once("::") else {
            continue;
        };
        if !mods.contains(module.trim()) {
            continue;
        }
        for name in idents(path).into_iter().filter(|n| !mods.contains(*n)) {
            names
                .entry(name.to_string())
                .or_insert(module.trim().to_string());
        }
    }
    names
}

/// The non-test `.rs` files of module `m` of the crate whose sources are `src`.
fn module_files(src: &Path, m: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let file = src.join(format!("{m}.rs"));
    if file.is_file() {
        files.push(file);
    }
    let mut dirs = vec![src.join(m)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() && name != "tests" {
                dirs.push(path);
            } else if name.ends_with(".rs") && name != "tests.rs" {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The module dependencies of the crate whose sources are `src` (see the module docs).
fn edges(src: &Path) -> Edges {
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    let mods = file_modules(&lib);
    let roots = root_names(&lib, &mods);
    let mut out: Edges = mods.iter().map(|m| (m.clone(), BTreeMap::new())).collect();
    for m in &mods {
        for file in module_files(src, m) {
            let text = fs::read_to_string(&file).unwrap();
            let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
            for (n, line) in text.lines().enumerate() {
                let line = code(line);
                let mut targets = Vec::new();
                for (i, _) in line.match_indices("crate::") {
                    let after = &line[i + "crate::".len()..];
                    if let Some(group) = after.strip_prefix('{') {
                        targets.extend(idents(group.split('}').next().unwrap_or("")));
                    } else if let Some(first) = idents(after).first() {
                        targets.push(first);
                    }
                }
                for t in targets {
                    let to = if mods.contains(t) {
                        Some(t.to_string())
                    } else {
                        roots.get(t).cloned()
                    };
                    if let Some(to) = to.filter(|to| to != m) {
                        let at = file.strip_prefix(src).unwrap_or(&file).display();
                        out.get_mut(m)
                            .unwrap()
                            .entry(to)
                            .or_insert_with(|| format!("{at}:{}: {}", n + 1, line.trim()));
                    }
                }
            }
        }
    }
    out
}

/// The circles (strongly connected components of more than one module) of `edges`.
fn circles(edges: &Edges) -> Vec<Vec<String>> {
    // Two modules are in one circle when each reaches the other.
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for to in edges.get(&m).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(to.clone()) {
                    todo.push(to.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|m| (m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for m in edges.keys() {
        if done.contains(m) || !reached[m].contains(m) {
            continue;
        }
        let circle: Vec<String> = reached[m]
            .iter()
            .filter(|o| reached[*o].contains(m))
            .cloned()
            .collect();
        done.extend(circle.iter().cloned());
        if circle.len() > 1 {
            out.push(circle);
        }
    }
    out
}

/// The failure message for the circles of `edges`: each circle and the lines that tie it.
fn report(edges: &Edges) -> String {
    let mut s = String::new();
    for circle in circles(edges) {
        s.push_str(&format!("  circle {}:\n", circle.join(", ")));
        for from in &circle {
            for (to, line) in &edges[from] {
                if circle.contains(to) {
                    s.push_str(&format!("    {from} -> {to}: {line}\n"));
                }
            }
        }
    }
    s
}

#[test]
fn no_crate_has_an_import_circle_among_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut crates = vec![root.join("src")];
    for entry in fs::read_dir(root).unwrap().flatten() {
        let src = entry.path().join("src");
        if src.join("lib.rs").is_file() && entry.file_name() != "fuzz" {
            crates.push(src);
        }
    }
    // The walk found the crates: the exporter has many modules and dependencies among them.
    let exporter = edges(&root.join("exporter/src"));
    assert!(exporter.len() > 10 && exporter.values().map(|e| e.len()).sum::<usize>() > 20);
    let mut failures = String::new();
    for src in &crates {
        let found = report(&edges(src));
        if !found.is_empty() {
            failures.push_str(&format!("{}:\n{found}", src.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "import circles (see tests/house_circles.rs): move what both sides need below them\n{failures}"
    );
}

#[test]
fn a_circle_through_a_root_re_export_is_found_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |rel: &str, text: &str| {
        let path = src.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "//! A crate.\nmod a;\npub mod b;\npub(crate) mod c;\nmod d;\npub use c::{Thing, deep::Other};\n",
    );
    write(
        "a.rs",
        "//! A.\nuse crate::b::X; // uses crate::d in a comment only\n",
    );
    write("b/mod.rs", "//! B.\nmod inner;\n");
    write(
        "b/inner.rs",
        "//! Inner.\nfn f() -> crate::Thing { todo!() }\n",
    );
    write("c/mod.rs", "//! C.\nuse crate::{a::Y, d};\n");
    // d depends on a, but nothing in the circle depends on d except c; and d's tests that
    // name b do not count.
    write(
        "d.rs",
        "//! D.\nuse crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n",
    );
    write("d/tests.rs", "use crate::b;\n");
    let e = edges(src);
    assert_eq!(
        circles(&e),
        vec![vec!["a".to_string(), "b".into(), "c".into(), "d".into()]]
    );
    let text = report(&e);
    assert!(
        text.contains("    a -> b: a.rs:2: use crate::b::X;"),
        "{text}"
    );
    assert!(
        text.contains("    b -> c: b/inner.rs:2: fn f() -> crate::Thing { todo!() }"),
        "{text}"
    );
    assert!(!e["d"].contains_key("b"), "{e:?}");
    assert!(!e["a"].contains_key("d"), "comments do not count: {e:?}");

    // Cut one step (c no longer uses a or d): no circle.
    write("c/mod.rs", "//! C.\nuse std::fmt;\n");
    assert!(circles(&edges(src)).is_empty());
}
