//! The fixture's native frames pointed into the objects `native` built, so that they resolve
//! on this machine.
//!
//! The eBPF fixture's dictionary has 90 native locations (no lines, `profile.frame.type =
//! native`) in nine mappings (`libjvm.so`, `libc`, `libpthread`, the vDSO, `libstdc++`,
//! `PerformanceTest`, `node`); its stacks use them 111 times among 333 frames. Each of those
//! mappings becomes one of the built objects (by what it was: the executables the C++
//! executable, `libjvm`/`libstdc++` the C++ library, the C libraries and the vDSO the C
//! library), as the profiler sends it: the object's file name, its executable segment in ELF
//! space, its GNU build id and file id. Stacks, threads and sessions stay the fixture's.
//!
//! Every request then gets its addresses ([`NativeFrames::apply`]): a share of each object's
//! locations are *new* in request `g`: the `j`-th location of an object gets the object's
//! address `(g * n + j) mod len` (`n` its locations per request, `len` its addresses), so
//! consecutive requests sweep every function of every object and the (build id, address) cache
//! sees new addresses until the whole set has been sent once ([`NativeFrames::cycle`]
//! requests); the other locations are *stable*: they keep the address they have in the
//! client's first request, as a process's call sites and hot loops do. In the repository's two
//! consecutive captures of one eBPF profiler (`ebpf-k8s-0.pb`, `ebpf-k8s-1.pb`), 15 of the
//! second request's 56 native addresses were in the first (15 of the first's 29 came back):
//! about half of each request's addresses are new.

use crate::native::{Kind, NativeObject, Objects};
use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, KeyValueAndUnit, ProfilesDictionary, any_value,
};

/// The rewritten locations and their address pools.
pub struct NativeFrames {
    /// Per object: its address pool and the dictionary locations that take addresses from it.
    objects: Vec<(Vec<u64>, Vec<usize>)>,
}

fn string_index(d: &mut ProfilesDictionary, s: &str) -> i32 {
    if let Some(i) = d.string_table.iter().position(|x| x == s) {
        return i as i32;
    }
    d.string_table.push(s.to_owned());
    (d.string_table.len() - 1) as i32
}

fn str_attr(d: &mut ProfilesDictionary, key: &str, value: String) -> i32 {
    let key_strindex = string_index(d, key);
    d.attribute_table.push(KeyValueAndUnit {
        key_strindex,
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
        unit_strindex: 0,
    });
    (d.attribute_table.len() - 1) as i32
}

fn attr_str(d: &ProfilesDictionary, index: i32) -> Option<(&str, &str)> {
    let a = d.attribute_table.get(usize::try_from(index).ok()?)?;
    let key = d.string_table.get(usize::try_from(a.key_strindex).ok()?)?;
    match a.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(v) => Some((key, v)),
        _ => None,
    }
}

/// Which object stands in for a fixture mapping named `name`.
fn kind_of(name: &str) -> Kind {
    if name.contains("jvm") || name.contains("stdc++") {
        Kind::CxxLibrary
    } else if name.starts_with("lib") || name.contains("vdso") {
        Kind::CLibrary
    } else {
        Kind::Executable
    }
}

impl NativeFrames {
    /// Rewrites the native mappings of `req`'s dictionary in place (see the module docs).
    pub fn prepare(req: &mut ExportProfilesServiceRequest, objects: &Objects) -> NativeFrames {
        let d = req
            .dictionary
            .as_mut()
            .expect("the fixture has a dictionary");
        let kinds = [Kind::Executable, Kind::CxxLibrary, Kind::CLibrary];
        let mut out: Vec<(Vec<u64>, Vec<usize>)> = kinds
            .iter()
            .map(|k| (objects.get(*k).addresses.clone(), Vec::new()))
            .collect();
        let mut rewritten: Vec<Option<Kind>> = vec![None; d.mapping_table.len()];
        for li in 1..d.location_table.len() {
            let loc = &d.location_table[li];
            let native = loc
                .attribute_indices
                .iter()
                .filter_map(|&a| attr_str(d, a))
                .any(|(k, v)| k == "profile.frame.type" && v == "native");
            let m = usize::try_from(loc.mapping_index).unwrap_or(0);
            if !native || !loc.lines.is_empty() || m == 0 || m >= d.mapping_table.len() {
                continue;
            }
            let kind = match rewritten[m] {
                Some(k) => k,
                None => {
                    let name = d
                        .string_table
                        .get(d.mapping_table[m].filename_strindex as usize)
                        .cloned()
                        .unwrap_or_default();
                    let k = kind_of(&name);
                    rewrite_mapping(d, m, objects.get(k));
                    rewritten[m] = Some(k);
                    k
                }
            };
            let o = kinds.iter().position(|x| *x == kind).unwrap_or(0);
            out[o].1.push(li);
        }
        NativeFrames { objects: out }
    }

    /// Native locations per request.
    pub fn locations(&self) -> usize {
        self.objects.iter().map(|(_, l)| l.len()).sum()
    }

    /// Distinct addresses over all objects.
    pub fn addresses(&self) -> usize {
        self.objects
            .iter()
            .filter(|(_, l)| !l.is_empty())
            .map(|(p, _)| p.len())
            .sum()
    }

    /// Requests after which every address has been sent once.
    pub fn cycle(&self) -> u64 {
        self.objects
            .iter()
            .filter(|(_, l)| !l.is_empty())
            .map(|(p, l)| p.len().div_ceil(l.len()) as u64)
            .max()
            .unwrap_or(1)
    }

    /// Gives request number `g` of a client whose first request is number `first` its
    /// addresses: `new_percent` % of each object's locations (spread evenly) new, the others
    /// as in request `first` (see the module docs).
    pub fn apply(
        &self,
        req: &mut ExportProfilesServiceRequest,
        g: u64,
        first: u64,
        new_percent: u64,
    ) {
        let Some(d) = req.dictionary.as_mut() else {
            return;
        };
        for (pool, locs) in &self.objects {
            let n = locs.len() as u64;
            for (j, &li) in locs.iter().enumerate() {
                let j = j as u64;
                let new = (j + 1) * new_percent / 100 != j * new_percent / 100;
                let number = if new { g } else { first };
                let k = ((number * n + j) % pool.len() as u64) as usize;
                d.location_table[li].address = pool[k];
            }
        }
    }
}

/// Mapping `m` becomes `o` as the eBPF profiler sends it.
fn rewrite_mapping(d: &mut ProfilesDictionary, m: usize, o: &NativeObject) {
    let filename_strindex = string_index(d, &o.name);
    let gnu = str_attr(
        d,
        "process.executable.build_id.gnu",
        hex::encode(&o.build_id),
    );
    let htl = str_attr(
        d,
        "process.executable.build_id.htlhash",
        hex::encode(&o.htlhash),
    );
    let map = &mut d.mapping_table[m];
    (map.memory_start, map.memory_limit, map.file_offset) = o.segment;
    map.filename_strindex = filename_strindex;
    map.attribute_indices = vec![htl, gnu];
}
