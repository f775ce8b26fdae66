//! Stack counts of pprof, folded, OTLP and Sentry data by plain decodes, independent of the
//! translator: a hand-written protobuf walk for pprof, `serde_json::Value` for chunks, the
//! prost OTLP types for OTLP, and `go tool pprof -raw`'s text. A stack is its function
//! names, leaf first, one per inline level.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;
use std::process::Command;

/// Stack -> how often it was seen.
pub type Counts = BTreeMap<Vec<String>, u64>;

fn varint(b: &[u8], i: &mut usize) -> u64 {
    let mut x = 0u64;
    let mut shift = 0;
    loop {
        let c = b[*i];
        *i += 1;
        x |= u64::from(c & 0x7f) << shift;
        shift += 7;
        if c < 0x80 {
            return x;
        }
    }
}

/// (field, wire type, varint value, bytes) of one message's fields.
fn fields(b: &[u8]) -> Vec<(u64, u64, u64, &[u8])> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i);
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push((field, 0, varint(b, &mut i), &b[0..0])),
            1 => {
                out.push((field, 1, 0, &b[i..i + 8]));
                i += 8;
            }
            2 => {
                let len = varint(b, &mut i) as usize;
                out.push((field, 2, 0, &b[i..i + len]));
                i += len;
            }
            5 => {
                out.push((field, 5, 0, &b[i..i + 4]));
                i += 4;
            }
            w => panic!("wire type {w}"),
        }
    }
    out
}

/// A repeated integer field, packed or not.
fn ints(f: &(u64, u64, u64, &[u8])) -> Vec<u64> {
    if f.1 == 0 {
        return vec![f.2];
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < f.3.len() {
        out.push(varint(f.3, &mut i));
    }
    out
}

fn inflate(bytes: &[u8]) -> Vec<u8> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes)
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        bytes.to_vec()
    }
}

/// The sample types (`type/unit`) and period of a pprof profile.
pub fn pprof_sample_types(bytes: &[u8]) -> Vec<String> {
    let raw = inflate(bytes);
    let top = fields(&raw);
    let strings: Vec<String> = top
        .iter()
        .filter(|f| f.0 == 6)
        .map(|f| String::from_utf8(f.3.to_vec()).unwrap())
        .collect();
    top.iter()
        .filter(|f| f.0 == 1)
        .map(|f| {
            let vt = fields(f.3);
            let get = |n| vt.iter().find(|x| x.0 == n).map_or(0, |x| x.2) as usize;
            format!("{}/{}", strings[get(1)], strings[get(2)])
        })
        .collect()
}

/// Stack counts of a pprof profile: the first sample type whose unit is `count`, else the
/// first type divided by the period.
pub fn pprof_counts(bytes: &[u8]) -> Counts {
    let raw = inflate(bytes);
    let top = fields(&raw);
    let strings: Vec<String> = top
        .iter()
        .filter(|f| f.0 == 6)
        .map(|f| String::from_utf8(f.3.to_vec()).unwrap())
        .collect();
    let types = pprof_sample_types(bytes);
    let period = top.iter().find(|f| f.0 == 12).map_or(0, |f| f.2);
    let (column, per) = match types.iter().position(|t| t.ends_with("/count")) {
        Some(i) => (i, 1),
        None => (0, period.max(1)),
    };
    let mut functions = HashMap::new();
    for f in top.iter().filter(|f| f.0 == 5) {
        let ff = fields(f.3);
        let get = |n| ff.iter().find(|x| x.0 == n).map_or(0, |x| x.2);
        functions.insert(get(1), strings[get(2) as usize].clone());
    }
    let mut locations: HashMap<u64, Vec<String>> = HashMap::new();
    for l in top.iter().filter(|f| f.0 == 4) {
        let lf = fields(l.3);
        let id = lf.iter().find(|x| x.0 == 1).map_or(0, |x| x.2);
        let names = lf
            .iter()
            .filter(|x| x.0 == 4)
            .map(|line| {
                let fid = fields(line.3).iter().find(|x| x.0 == 1).map_or(0, |x| x.2);
                functions[&fid].clone()
            })
            .collect();
        locations.insert(id, names);
    }
    let mut out = Counts::new();
    for s in top.iter().filter(|f| f.0 == 2) {
        let sf = fields(s.3);
        let mut stack = Vec::new();
        let mut values = Vec::new();
        for f in &sf {
            match f.0 {
                1 => {
                    for id in ints(f) {
                        stack.extend(locations[&id].iter().cloned());
                    }
                }
                2 => values.extend(ints(f)),
                _ => {}
            }
        }
        let n = values[column] / per;
        if n > 0 {
            *out.entry(stack).or_default() += n;
        }
    }
    out
}

/// Stack counts of folded text (`root;...;leaf N`; a frame `name (file:line)` is `name`).
pub fn folded_counts(text: &str) -> Counts {
    let mut out = Counts::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (stack, n) = line.rsplit_once(' ').unwrap_or(("", line));
        let frames = stack
            .split(';')
            .filter(|f| !f.is_empty())
            .rev()
            .map(|f| match f.rfind(" (") {
                Some(i) if f.ends_with(')') && f[i..].contains(':') => f[..i].to_owned(),
                _ => f.to_owned(),
            })
            .collect();
        *out.entry(frames).or_default() += n.parse::<u64>().unwrap();
    }
    out
}

/// Stack counts of NDJSON Sentry chunks: each sample counts 1.
pub fn sentry_counts(ndjson: &str) -> Counts {
    let mut out = Counts::new();
    for line in ndjson.lines().filter(|l| !l.trim().is_empty()) {
        let c: serde_json::Value = serde_json::from_str(line).unwrap();
        let p = &c["profile"];
        let frames = p["frames"].as_array().unwrap();
        for s in p["samples"].as_array().unwrap() {
            let stack = p["stacks"][s["stack_id"].as_u64().unwrap() as usize]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    let f = &frames[f.as_u64().unwrap() as usize];
                    f["function"].as_str().unwrap_or("").to_owned()
                })
                .collect();
            *out.entry(stack).or_default() += 1;
        }
    }
    out
}

/// Stack counts of the OTLP profiles whose sample unit is `count` (values summed), and the
/// number of profiles in the request.
pub fn otlp_count_profiles(bytes: &[u8]) -> (Counts, usize) {
    use profilink_proto::otlp::ExportProfilesServiceRequest;
    use prost::Message;
    let req = ExportProfilesServiceRequest::decode(bytes).unwrap();
    let d = req.dictionary.unwrap();
    let s = |i: i32| d.string_table[i as usize].clone();
    let mut out = Counts::new();
    let mut profiles = 0;
    for rp in &req.resource_profiles {
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                profiles += 1;
                if s(p.sample_type.unwrap().unit_strindex) != "count" {
                    continue;
                }
                for sample in &p.samples {
                    let mut stack = Vec::new();
                    for &l in &d.stack_table[sample.stack_index as usize].location_indices {
                        for line in &d.location_table[l as usize].lines {
                            let f = d.function_table[line.function_index as usize];
                            stack.push(s(f.name_strindex));
                        }
                    }
                    let n: i64 = sample.values.iter().sum();
                    if n > 0 {
                        *out.entry(stack).or_default() += n as u64;
                    }
                }
            }
        }
    }
    (out, profiles)
}

/// True when `go` runs; panics when it does not but `PROFILINK_REQUIRE_PPROF_TOOLS=1`.
pub fn go_available() -> bool {
    let ok = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("PROFILINK_REQUIRE_PPROF_TOOLS").is_ok_and(|v| v == "1") {
        panic!("go is required (PROFILINK_REQUIRE_PPROF_TOOLS=1): apt-get install golang");
    }
    ok
}

/// Stack counts of a pprof file as `go tool pprof -traces -sample_index=0` prints them (the
/// first sample type, `samples/count` in profilink's output), and the `Type:` it names. `go
/// tool pprof` leaves out samples without locations (py-spy's unwinding failures), so those
/// are not in the counts.
pub fn go_tool_counts(path: &Path) -> (Counts, String) {
    let out = Command::new("go")
        .args(["tool", "pprof", "-traces", "-sample_index=0"])
        .arg(path)
        .output()
        .expect("go tool pprof");
    assert!(
        out.status.success(),
        "go tool pprof -traces failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let kind = text
        .lines()
        .find_map(|l| l.strip_prefix("Type: "))
        .unwrap_or("")
        .to_owned();
    let mut counts = Counts::new();
    // Blocks between `-----------+-----...` lines: label lines (`key:  value`), then
    // `COUNT   leaf`, then one line per caller frame (inline levels marked ` (inline)`).
    for block in text
        .split("-----------+-------------------------------------------------------")
        .skip(1)
    {
        let mut stack = Vec::new();
        let mut count = None;
        for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if count.is_none() {
                if let Some((n, name)) = line.split_once(char::is_whitespace)
                    && let Ok(n) = n.parse::<u64>()
                {
                    count = Some(n);
                    stack.push(name.trim().to_owned());
                }
                continue;
            }
            stack.push(line.to_owned());
        }
        let stack = stack
            .into_iter()
            .map(|f| f.strip_suffix(" (inline)").map_or(f.clone(), str::to_owned))
            .collect();
        if let Some(n) = count {
            *counts.entry(stack).or_default() += n;
        }
    }
    (counts, kind)
}
