//! Reading a request for symbolization: which locations are native frames without names,
//! which object each one's mapping claims, and which processes map it (every wire index is
//! bounds-checked; bad ones are skipped).

use crate::file_id::{BUILD_ID_GNU_KEY, HTLHASH_KEY, ObjectId};
use profilink_proto::otlp::{AnyValue, ProfilesDictionary, ResourceProfiles, any_value};
use std::collections::{BTreeSet, HashMap};

/// Location attribute naming the frame's runtime (`native` for the frames symbolized here).
pub const FRAME_TYPE_KEY: &str = "profile.frame.type";
/// Resource or sample attribute with the process id.
pub const PID_KEY: &str = "process.pid";
/// Processes remembered per mapping (each one is a place to look for its file).
const MAX_PIDS: usize = 4;

/// A mapping that native frames use.
#[derive(Debug, Clone)]
pub(crate) struct MappingRef {
    /// Its claimed identity: the GNU build id when present, else the file id.
    pub id: ObjectId,
    /// Its file name (a base name from the eBPF profiler).
    pub filename: String,
    /// Processes that map it.
    pub pids: BTreeSet<u32>,
}

/// What [`scan`] found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Native locations to symbolize: (location index, mapping index).
    pub native: Vec<(usize, usize)>,
    /// Locations that are not native frames needing names (index 0 excluded).
    pub not_native: u64,
    /// Native locations whose mapping has no usable identity.
    pub no_identity: u64,
    /// Mappings by index.
    pub mappings: HashMap<usize, MappingRef>,
}

fn string(d: &ProfilesDictionary, i: i32) -> &str {
    usize::try_from(i)
        .ok()
        .and_then(|i| d.string_table.get(i))
        .map_or("", String::as_str)
}

fn attr(d: &ProfilesDictionary, i: i32) -> Option<(&str, &AnyValue)> {
    let a = d.attribute_table.get(usize::try_from(i).ok()?)?;
    Some((string(d, a.key_strindex), a.value.as_ref()?))
}

fn as_str(v: &AnyValue) -> Option<&str> {
    match &v.value {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

fn as_pid(v: &AnyValue) -> Option<u32> {
    match &v.value {
        Some(any_value::Value::IntValue(i)) => u32::try_from(*i).ok(),
        Some(any_value::Value::StringValue(s)) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|p| *p > 0)
}

fn mapping_id(d: &ProfilesDictionary, index: usize) -> Option<ObjectId> {
    let m = d.mapping_table.get(index)?;
    let mut gnu = None;
    let mut htl = None;
    for &ai in &m.attribute_indices {
        let Some((k, v)) = attr(d, ai) else { continue };
        let id = match &v.value {
            Some(any_value::Value::BytesValue(b)) => Some(hex::encode(b)),
            _ => as_str(v).map(str::to_owned),
        };
        let Some(id) = id else { continue };
        if k == BUILD_ID_GNU_KEY {
            gnu = ObjectId::gnu_from_hex(&id);
        } else if k == HTLHASH_KEY {
            htl = ObjectId::htlhash_from_hex(&id);
        }
    }
    gnu.or(htl)
}

/// Scans a request (see the module docs).
pub(crate) fn scan(d: &ProfilesDictionary) -> Scan {
    let mut out = Scan::default();
    let mut no_identity: HashMap<usize, ()> = HashMap::new();
    for (i, loc) in d.location_table.iter().enumerate().skip(1) {
        let mut frame_type = None;
        for &ai in &loc.attribute_indices {
            if let Some((k, v)) = attr(d, ai)
                && k == FRAME_TYPE_KEY
            {
                frame_type = as_str(v);
            }
        }
        let native = matches!(frame_type, None | Some("native"));
        let m = usize::try_from(loc.mapping_index).unwrap_or(0);
        if !native
            || !loc.lines.is_empty()
            || loc.address == 0
            || m == 0
            || m >= d.mapping_table.len()
        {
            out.not_native += 1;
            continue;
        }
        if let std::collections::hash_map::Entry::Vacant(e) = out.mappings.entry(m) {
            match mapping_id(d, m) {
                Some(id) => {
                    e.insert(MappingRef {
                        id,
                        filename: string(d, d.mapping_table[m].filename_strindex).to_owned(),
                        pids: BTreeSet::new(),
                    });
                }
                None => {
                    no_identity.insert(m, ());
                }
            }
        }
        if no_identity.contains_key(&m) {
            out.no_identity += 1;
            continue;
        }
        out.native.push((i, m));
    }
    out
}

/// Adds to each mapping the pids of the resources and samples whose stacks use it.
pub(crate) fn collect_pids(
    d: &ProfilesDictionary,
    resources: &[ResourceProfiles],
    mappings: &mut HashMap<usize, MappingRef>,
) {
    for rp in resources {
        let resource_pid = rp.resource.as_ref().and_then(|r| {
            r.attributes
                .iter()
                .find(|kv| kv.key == PID_KEY)
                .and_then(|kv| kv.value.as_ref())
                .and_then(as_pid)
        });
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                for s in &p.samples {
                    let pid = s
                        .attribute_indices
                        .iter()
                        .filter_map(|&ai| attr(d, ai))
                        .find(|(k, _)| *k == PID_KEY)
                        .and_then(|(_, v)| as_pid(v))
                        .or(resource_pid);
                    let Some(pid) = pid else { continue };
                    let Some(stack) = usize::try_from(s.stack_index)
                        .ok()
                        .and_then(|i| d.stack_table.get(i))
                    else {
                        continue;
                    };
                    for &li in &stack.location_indices {
                        let Some(loc) = usize::try_from(li)
                            .ok()
                            .and_then(|i| d.location_table.get(i))
                        else {
                            continue;
                        };
                        let Ok(m) = usize::try_from(loc.mapping_index) else {
                            continue;
                        };
                        if let Some(mr) = mappings.get_mut(&m)
                            && mr.pids.len() < MAX_PIDS
                        {
                            mr.pids.insert(pid);
                        }
                    }
                }
            }
        }
    }
}
