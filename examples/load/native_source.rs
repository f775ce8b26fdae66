//! The programs `--symbolize` compiles: generated C++ and C sources with hundreds of functions,
//! written so that `-O2` inlines deeply (templates, the standard library's containers and
//! algorithms, `static inline` helpers), spread over several compilation units as real
//! libraries are (DWARF is parsed per unit).
//!
//! Each function `step_<i>` is `noinline`, calls the previous one (so stacks have native
//! callers), and inlines its own helper plus template code; every third one builds a
//! `std::map<std::string, long>`, whose inlined tree code makes inline chains several levels
//! deep.

use std::fmt::Write;

/// The C++ prelude every unit includes (templates instantiated per unit, as headers are).
const CXX_PRELUDE: &str = r#"#include <cstdio>
#include <vector>
#include <map>
#include <string>
#include <algorithm>
namespace gen {
template <typename T, int K> struct Acc {
  T v;
  inline void add(T x) { for (int i = 0; i < K; i++) v = v * 31 + x + i; }
};
template <typename T, int K> static inline T fold(const std::vector<T>& xs) {
  Acc<T, K> a{0};
  for (auto x : xs) a.add(x);
  return a.v;
}
template <typename K> __attribute__((noinline)) long tally(const std::map<K, long>& m) {
  long t = 0;
  for (auto& kv : m) t += kv.second + (long)kv.first.size();
  return t;
}
}
"#;

/// The namespace of function `i` of a program seeded `seed`.
fn cxx_namespace(i: usize, seed: usize) -> String {
    format!("mod{}", (i * 7 + seed) % 23)
}

/// The qualified name of function `i` (declared in every unit that calls it).
fn cxx_declaration(i: usize, seed: usize) -> String {
    format!(
        "namespace {} {{ long step_{i}(long n); }}\n",
        cxx_namespace(i, seed)
    )
}

/// C++ sources of a program of `functions` functions in `units` compilation units; the last
/// unit has `main` when `executable`. `seed` makes programs differ.
pub fn cxx_units(functions: usize, units: usize, seed: usize, executable: bool) -> Vec<String> {
    let per_unit = functions.div_ceil(units);
    let mut out = Vec::new();
    for u in 0..units {
        let (lo, hi) = (u * per_unit, ((u + 1) * per_unit).min(functions));
        let mut s = String::from(CXX_PRELUDE);
        if lo > 0 {
            s.push_str(&cxx_declaration(lo - 1, seed));
        }
        for i in lo..hi {
            let ns = cxx_namespace(i, seed);
            let _ = writeln!(s, "namespace {ns} {{");
            let _ = writeln!(
                s,
                "static inline long mix_{i}(long s, long x) {{ return (s ^ (x << {})) * {}L; }}",
                i % 13 + 1,
                2 * i + seed * 2 + 3
            );
            let _ = writeln!(s, "__attribute__((noinline)) long step_{i}(long n) {{");
            let _ = writeln!(s, "  std::vector<long> xs;");
            let _ = writeln!(
                s,
                "  for (long j = 0; j < n % {} + 3; j++) xs.push_back(mix_{i}(j, n));",
                i % 11 + 5
            );
            let _ = writeln!(s, "  long r = gen::fold<long, {}>(xs);", i % 7 + 2);
            if i % 3 == 0 {
                let _ = writeln!(
                    s,
                    "  if (n % {} == 0) {{ std::map<std::string, long> m; m[std::to_string(n)] = r; r += gen::tally(m); }}",
                    i % 5 + 2
                );
            }
            let _ = writeln!(s, "  std::sort(xs.begin(), xs.end());");
            if i > 0 {
                let _ = writeln!(
                    s,
                    "  return r + xs[0] + (n > 0 ? {}::step_{}(n - 1) : 0);",
                    cxx_namespace(i - 1, seed),
                    i - 1
                );
            } else {
                let _ = writeln!(s, "  return r + xs[0];");
            }
            let _ = writeln!(s, "}}\n}}");
        }
        if executable && u == units - 1 {
            let last = functions - 1;
            let _ = writeln!(
                s,
                "int main(int argc, char**) {{ std::printf(\"%ld\\n\", {}::step_{last}(argc)); }}",
                cxx_namespace(last, seed)
            );
        }
        out.push(s);
    }
    out
}

/// C sources of a shared library of `functions` functions in `units` units (libc-like: plain
/// loops, `static inline` helpers, calls down a chain).
pub fn c_units(functions: usize, units: usize) -> Vec<String> {
    let per_unit = functions.div_ceil(units);
    let mut out = Vec::new();
    for u in 0..units {
        let (lo, hi) = (u * per_unit, ((u + 1) * per_unit).min(functions));
        let mut s = String::from("#include <string.h>\n");
        if lo > 0 {
            let _ = writeln!(s, "long cfn_{}(long n, char *buf);", lo - 1);
        }
        for i in lo..hi {
            let _ = writeln!(
                s,
                "static inline long rot_{i}(long x) {{ return (x << {}) | ((unsigned long)x >> {}); }}",
                i % 17 + 1,
                64 - (i % 17 + 1)
            );
            let _ = writeln!(
                s,
                "static inline long sum_{i}(const char *b, long n) {{ long t = 0; for (long k = 0; k < n; k++) t = rot_{i}(t) + b[k]; return t; }}"
            );
            let _ = writeln!(
                s,
                "__attribute__((noinline)) long cfn_{i}(long n, char *buf) {{"
            );
            let _ = writeln!(s, "  memset(buf, (int)(n + {i}), {});", i % 29 + 8);
            let _ = writeln!(s, "  long t = sum_{i}(buf, {});", i % 29 + 8);
            if i > 0 {
                let _ = writeln!(
                    s,
                    "  return t + (n > 0 ? cfn_{}(n - 1, buf + 1) : 0);",
                    i - 1
                );
            } else {
                let _ = writeln!(s, "  return t;");
            }
            let _ = writeln!(s, "}}");
        }
        out.push(s);
    }
    out
}
