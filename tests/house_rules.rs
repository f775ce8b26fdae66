//! The house rules that can be checked by reading the tree, checked on every test run, so they
//! hold themselves: no non-test Rust source over [`MAX_LINES`] lines, and a `//!` doc comment
//! at the top of every one. A failure names each file (and its line count).
//!
//! A *non-test Rust source* is every `.rs` file under the workspace root (this crate's
//! `CARGO_MANIFEST_DIR`), that is every crate's `src/`, `benches/`, `examples/` and `build.rs`,
//! and `fuzz/fuzz_targets/`, except:
//!
//! * files named `tests.rs` (a module's unit tests, `#[cfg(test)] mod tests;`);
//! * files under a directory named `tests` (integration tests and their support code);
//! * anything under a directory named `target` (build output, `fuzz/target` included) or
//!   whose name starts with `.` (`.git`, editor and tool state).
//!
//! Lines are counted as [`str::lines`] counts them (`wc -l` for a file ending in a newline).
//! A unit-test module written inline (`#[cfg(test)] mod tests { … }`) counts toward its
//! file: tests that make a file long move to a `tests.rs` beside it.

use std::fs;
use std::path::{Path, PathBuf};

/// The most lines a non-test Rust source may have.
const MAX_LINES: usize = 600;

/// Whether a directory (by name) is left out of the walk: build output, hidden directories,
/// and test directories.
fn skipped_dir(name: &str) -> bool {
    name == "target" || name == "tests" || name.starts_with('.')
}

/// The non-test Rust sources under `root` (see the module docs), sorted.
fn non_test_sources(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry
                .file_type()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if kind.is_dir() {
                if !skipped_dir(&name) {
                    dirs.push(path);
                }
            } else if kind.is_file() && name.ends_with(".rs") && name != "tests.rs" {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// A file that breaks a rule, as the failure message shows it.
#[derive(Debug, PartialEq, Eq)]
struct Breach {
    /// The file, relative to the walked root.
    file: String,
    /// What is wrong.
    what: String,
}

/// The rules' breaches among the non-test sources under `root`.
fn breaches(root: &Path) -> Vec<Breach> {
    let mut out = Vec::new();
    for path in non_test_sources(root) {
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let lines = text.lines().count();
        if lines > MAX_LINES {
            out.push(Breach {
                file: file.clone(),
                what: format!("{lines} lines (at most {MAX_LINES})"),
            });
        }
        if !text.starts_with("//!") {
            out.push(Breach {
                file,
                what: "does not start with a `//!` doc comment".to_string(),
            });
        }
    }
    out
}

/// The failure message for `found`, one file per line.
fn report(found: &[Breach]) -> String {
    found
        .iter()
        .map(|b| format!("  {}: {}\n", b.file, b.what))
        .collect()
}

#[test]
fn no_non_test_source_is_over_600_lines_and_each_starts_with_its_doc() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = non_test_sources(root);
    // The walk found the tree: the service's entry point and a member crate's sources.
    assert!(sources.contains(&root.join("src/main.rs")), "{sources:?}");
    assert!(
        sources.contains(&root.join("consumer/src/lib.rs")),
        "{sources:?}"
    );
    let found = breaches(root);
    assert!(
        found.is_empty(),
        "house rules (see tests/house_rules.rs): split the file by idea, don't wrap lines\n{}",
        report(&found)
    );
}

#[test]
fn the_rules_catch_a_long_file_and_a_missing_doc_and_skip_tests_and_targets() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |rel: &str, text: &str| {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    let lines = |n: usize| {
        let mut s = String::from("//! A file.\n");
        s.push_str(&"let x = 1;\n".repeat(n - 1));
        s
    };
    write("krate/src/at_limit.rs", &lines(600));
    write("krate/src/over.rs", &lines(601));
    write("krate/src/nodoc.rs", "/// Not a module doc.\nfn f() {}\n");
    write("krate/src/doc_not_first.rs", "\n//! Late.\n");
    write("krate/benches/bench_over.rs", &lines(700));
    // Not sources the rules apply to: unit tests, integration tests, build output, hidden
    // directories, other files.
    write("krate/src/module/tests.rs", &lines(900));
    write("krate/tests/big.rs", &lines(900));
    write("krate/tests/support/mod.rs", "no doc\n");
    write("target/debug/build/out.rs", &lines(900));
    write("fuzz/target/x/gen.rs", &lines(900));
    write(".git/hooks/x.rs", &lines(900));
    write("krate/src/notes.md", &lines(900));

    assert_eq!(
        breaches(root),
        vec![
            Breach {
                file: "krate/benches/bench_over.rs".into(),
                what: "700 lines (at most 600)".into(),
            },
            Breach {
                file: "krate/src/doc_not_first.rs".into(),
                what: "does not start with a `//!` doc comment".into(),
            },
            Breach {
                file: "krate/src/nodoc.rs".into(),
                what: "does not start with a `//!` doc comment".into(),
            },
            Breach {
                file: "krate/src/over.rs".into(),
                what: "601 lines (at most 600)".into(),
            },
        ]
    );
    assert!(report(&breaches(root)).contains("  krate/src/over.rs: 601 lines (at most 600)\n"));
}
