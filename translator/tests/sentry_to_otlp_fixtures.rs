//! Real Sentry fixtures → OTLP: strictly valid, exactly the input's observations, links exactly
//! as a brute-force reading of the rule finds them, and chunks restored exactly.

use profilink_proto::otlp::{ExportProfilesServiceRequest, any_value};
use profilink_proto::sentry::secs_to_nanos;
use profilink_proto::sentry::{Envelope, Frame, ProfileChunk, SampleProfileV1, Transaction};
use profilink_proto::validate::validate_otlp;
use profilink_translator::sentry_to_otlp::{
    OtlpOptions, SentryInput, V1WithTransaction, to_otlp, try_to_otlp,
};
use profilink_translator::sentry_to_otlp::{
    canonical_form, is_from_chunk, restore_chunk, restore_chunk_with_links, restore_request,
};
use profilink_translator::{AttrValue, Dictionary};
use profilink_translator::{ExactLinks, NoLinks, TransactionLinks};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/sentry"
    ))
}

fn chunks() -> Vec<ProfileChunk> {
    ["trace-chunk-00.envelope", "trace-chunk-01.envelope"]
        .iter()
        .map(|f| {
            let env = Envelope::parse(&std::fs::read(fixtures().join("python").join(f)).unwrap())
                .unwrap();
            let item = env.items.iter().find(|i| i.is_profile_chunk()).unwrap();
            ProfileChunk::from_json(&item.payload).unwrap()
        })
        .collect()
}

fn v1() -> V1WithTransaction {
    let env =
        Envelope::parse(&std::fs::read(fixtures().join("python-v1/v1-0001.envelope")).unwrap())
            .unwrap();
    let mut out = V1WithTransaction::default();
    for item in &env.items {
        match item.item_type() {
            Some("profile") => out.profile = SampleProfileV1::from_json(&item.payload).unwrap(),
            Some("transaction") => {
                out.transaction = Some(Transaction::from_json(&item.payload).unwrap())
            }
            _ => {}
        }
    }
    assert!(out.transaction.is_some());
    out
}

fn transactions() -> Vec<Transaction> {
    std::fs::read_to_string(fixtures().join("python/trace-transactions.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Transaction::from_json(l.as_bytes()).unwrap())
        .collect()
}

/// Strict validity: no errors and no warnings from the project's validator, plus the builder's
/// own promises (no duplicate entries in any table, zero entries present).
fn assert_strictly_valid(req: &ExportProfilesServiceRequest) {
    let findings = validate_otlp(req.dictionary.as_ref(), &req.resource_profiles);
    assert!(findings.is_empty(), "findings: {findings:#?}");
    let d = req.dictionary.as_ref().unwrap();
    assert_eq!(d.string_table[0], "");
    assert_eq!(d.attribute_table[0].value, None);
    assert!(d.link_table[0].trace_id.is_empty() && d.link_table[0].span_id.is_empty());
    assert_eq!(
        d.string_table.iter().collect::<HashSet<_>>().len(),
        d.string_table.len()
    );
    assert_eq!(
        d.stack_table.iter().collect::<HashSet<_>>().len(),
        d.stack_table.len()
    );
    assert_eq!(
        d.function_table.iter().collect::<HashSet<_>>().len(),
        d.function_table.len()
    );
    assert_eq!(
        d.mapping_table.iter().collect::<HashSet<_>>().len(),
        d.mapping_table.len()
    );
    assert_eq!(
        d.link_table.iter().collect::<HashSet<_>>().len(),
        d.link_table.len()
    );
    let locs: HashSet<String> = d.location_table.iter().map(|l| format!("{l:?}")).collect();
    assert_eq!(locs.len(), d.location_table.len());
    let attrs: HashSet<String> = d.attribute_table.iter().map(|a| format!("{a:?}")).collect();
    assert_eq!(attrs.len(), d.attribute_table.len());
    for l in &d.link_table[1..] {
        assert_eq!((l.trace_id.len(), l.span_id.len()), (16, 8));
    }
    for rp in &req.resource_profiles {
        for p in rp.scope_profiles.iter().flat_map(|s| &s.profiles) {
            assert_eq!(p.profile_id.len(), 16);
            for s in &p.samples {
                assert!(s.values.is_empty());
                assert!(s.timestamps_unix_nano.is_sorted());
                for &t in &s.timestamps_unix_nano {
                    assert!(t >= p.time_unix_nano && t < p.time_unix_nano + p.duration_nano);
                }
            }
        }
    }
}

type Stack = Vec<(String, String, i64)>;
type Link = Option<([u8; 16], [u8; 8])>;

/// Every observation of the request: (profiler or profile id, thread id, ns, stack) → link.
fn observations(req: &ExportProfilesServiceRequest) -> Vec<(String, String, u64, Stack, Link)> {
    let d = Dictionary::new(req.dictionary.as_ref());
    let mut out = Vec::new();
    for rp in &req.resource_profiles {
        let attrs = d
            .key_values(&rp.resource.as_ref().unwrap().attributes)
            .unwrap();
        let profiler = attrs
            .iter()
            .find(|a| a.key == "sentry.profiler_id")
            .and_then(|a| a.value.as_str());
        for p in rp.scope_profiles.iter().flat_map(|s| &s.profiles) {
            let owner = match profiler {
                Some(id) => id.to_owned(),
                None => {
                    let a = d.attributes(&p.attribute_indices).unwrap();
                    a.iter()
                        .find(|a| a.key == "sentry.profile_id")
                        .unwrap()
                        .value
                        .as_str()
                        .unwrap()
                        .to_owned()
                }
            };
            for s in &p.samples {
                let a = d.attributes(&s.attribute_indices).unwrap();
                let tid = match &a.iter().find(|a| a.key == "thread.id").unwrap().value {
                    AttrValue::Int(i) => i.to_string(),
                    AttrValue::Str(s) => (*s).to_owned(),
                    v => panic!("thread.id {v:?}"),
                };
                let stack: Stack = match d.stack(s.stack_index).unwrap() {
                    None => Vec::new(),
                    Some(st) => st
                        .location_indices
                        .iter()
                        .map(|&li| {
                            let loc = d.location(li).unwrap().unwrap();
                            match loc.lines.last() {
                                None => (String::new(), String::new(), 0),
                                Some(line) => {
                                    let f = d
                                        .function(line.function_index)
                                        .unwrap()
                                        .copied()
                                        .unwrap_or_default();
                                    (
                                        d.string(f.name_strindex).unwrap().to_owned(),
                                        d.string(f.filename_strindex).unwrap().to_owned(),
                                        line.line,
                                    )
                                }
                            }
                        })
                        .collect(),
                };
                let link = d.link(s.link_index).unwrap().map(|l| {
                    (
                        l.trace_id.as_slice().try_into().unwrap(),
                        l.span_id.as_slice().try_into().unwrap(),
                    )
                });
                for &t in &s.timestamps_unix_nano {
                    out.push((owner.clone(), tid.clone(), t, stack.clone(), link));
                }
            }
        }
    }
    out.sort();
    out
}

fn sentry_stack(frames: &[std::sync::Arc<Frame>], stack: &[usize]) -> Stack {
    stack
        .iter()
        .map(|&i| {
            let f = &frames[i];
            (
                f.function.as_deref().unwrap_or_default().to_owned(),
                f.abs_path
                    .as_deref()
                    .or(f.filename.as_deref())
                    .unwrap_or_default()
                    .to_owned(),
                i64::from(f.lineno.unwrap_or(0)),
            )
        })
        .collect()
}

fn chunk_observations(chunks: &[ProfileChunk]) -> Vec<(String, String, u64, Stack)> {
    let mut out: Vec<_> = chunks
        .iter()
        .flat_map(|c| {
            c.profile.samples.iter().map(|s| {
                (
                    c.profiler_id.clone(),
                    s.thread_id.to_string(),
                    secs_to_nanos(s.timestamp).unwrap(),
                    sentry_stack(&c.profile.frames, &c.profile.stacks[s.stack_id]),
                )
            })
        })
        .collect();
    out.sort();
    out
}

fn hex<const N: usize>(s: Option<&str>) -> Option<[u8; N]> {
    let v = hex::decode(s?).ok()?;
    v.try_into().ok()
}

/// The link rule, brute force: scan every span of every transaction.
fn brute_force_link(
    txns: &[Transaction],
    profiler: &str,
    thread: &str,
    t: u64,
    root_thread: impl Fn(&Transaction) -> Option<String>,
    any_profiler: bool,
) -> Link {
    // (start, end, ids) of the best child and the best root so far.
    type Best = Option<(u64, u64, ([u8; 16], [u8; 8]))>;
    let mut child: Best = None;
    let mut root: Best = None;
    let better = |best: &Option<(u64, u64, _)>, s: u64, e: u64| match best {
        None => true,
        Some((bs, be, _)) => s > *bs || (s == *bs && e < *be),
    };
    for txn in txns {
        if !any_profiler && txn.profiler_id() != Some(profiler) {
            continue;
        }
        let trace = txn.contexts.trace.as_ref().unwrap();
        let txn_trace = hex::<16>(trace.trace_id.as_deref());
        for span in &txn.spans {
            if span.thread_id().as_deref() != Some(thread) {
                continue;
            }
            let s = span.start_timestamp.unwrap().as_unix_nanos().unwrap();
            let e = span.timestamp.unwrap().as_unix_nanos().unwrap();
            if s <= t && t <= e && better(&child, s, e) {
                let tr = hex::<16>(span.trace_id.as_deref()).or(txn_trace).unwrap();
                child = Some((s, e, (tr, hex::<8>(span.span_id.as_deref()).unwrap())));
            }
        }
        if root_thread(txn).as_deref() == Some(thread) {
            let s = txn.start_timestamp.unwrap().as_unix_nanos().unwrap();
            let e = txn.timestamp.unwrap().as_unix_nanos().unwrap();
            if s <= t && t <= e && better(&root, s, e) {
                root = Some((
                    s,
                    e,
                    (
                        txn_trace.unwrap(),
                        hex::<8>(trace.span_id.as_deref()).unwrap(),
                    ),
                ));
            }
        }
    }
    child.or(root).map(|(_, _, ids)| ids)
}

#[test]
fn chunks_translate_to_strictly_valid_otlp_with_exactly_their_observations() {
    let chunks = chunks();
    let req = try_to_otlp(
        &SentryInput {
            chunks: &chunks,
            v1_profiles: &[],
        },
        &NoLinks,
        &OtlpOptions::default(),
    )
    .unwrap();
    assert_strictly_valid(&req);
    // Two profiler sessions -> two resources, one profile each.
    assert_eq!(req.resource_profiles.len(), 2);
    let got: Vec<_> = observations(&req)
        .into_iter()
        .map(|(p, t, ns, s, l)| {
            assert_eq!(l, None);
            (p, t, ns, s)
        })
        .collect();
    assert_eq!(got.len(), 1215 + 820);
    assert_eq!(got, chunk_observations(&chunks));

    // Samples are grouped: fewer OTLP samples than observations.
    let p = &req.resource_profiles[0].scope_profiles[0].profiles[0];
    assert!(p.samples.len() < 1215);
    // The inferred period is the (lower) median gap between a thread's consecutive samples.
    let mut by_thread: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for s in &chunks[0].profile.samples {
        by_thread
            .entry(&s.thread_id)
            .or_default()
            .push(secs_to_nanos(s.timestamp).unwrap());
    }
    let mut gaps: Vec<u64> = by_thread
        .values_mut()
        .flat_map(|ts| {
            ts.sort();
            ts.windows(2)
                .map(|w| w[1] - w[0])
                .filter(|g| *g > 0)
                .collect::<Vec<_>>()
        })
        .collect();
    gaps.sort();
    assert_eq!(p.period as u64, gaps[(gaps.len() - 1) / 2]);
    assert!(
        (5_000_000..50_000_000).contains(&p.period),
        "period {}",
        p.period
    );
    let d = req.dictionary.as_ref().unwrap();
    assert_eq!(
        d.string_table[p.sample_type.unwrap().type_strindex as usize],
        "samples"
    );
    assert_eq!(
        d.string_table[p.period_type.unwrap().type_strindex as usize],
        "cpu"
    );
    assert_eq!(hex::encode(&p.profile_id), chunks[0].chunk_id);
    // One dictionary: frames shared by the two chunks are stored once.
    let f0 = chunks[0].profile.frames.len();
    assert!(d.function_table.len() <= f0 + chunks[1].profile.frames.len());
}

#[test]
fn resource_and_profile_attributes_follow_the_convention() {
    let chunks = chunks();
    let req = try_to_otlp(
        &SentryInput {
            chunks: &chunks,
            v1_profiles: &[],
        },
        &NoLinks,
        &OtlpOptions::default(),
    )
    .unwrap();
    let d = Dictionary::new(req.dictionary.as_ref());
    let rp = &req.resource_profiles[0];
    let attrs: BTreeMap<&str, &str> = d
        .key_values(&rp.resource.as_ref().unwrap().attributes)
        .unwrap()
        .into_iter()
        .map(|a| (a.key, a.value.as_str().unwrap()))
        .collect();
    assert_eq!(attrs["service.name"], "clients-demo");
    assert_eq!(attrs["service.version"], "clients-demo@1.0.0");
    assert_eq!(attrs["deployment.environment.name"], "research");
    assert_eq!(attrs["telemetry.sdk.name"], "sentry.python");
    assert_eq!(attrs["telemetry.sdk.version"], "2.75.0");
    assert_eq!(attrs["telemetry.sdk.language"], "python");
    assert_eq!(attrs["sentry.platform"], "python");
    assert_eq!(attrs["sentry.profiler_id"], chunks[0].profiler_id);
    let scope = rp.scope_profiles[0].scope.as_ref().unwrap();
    assert_eq!(scope.name, "profilink");
    assert_eq!(scope.version, env!("CARGO_PKG_VERSION"));
    for kv in &rp.resource.as_ref().unwrap().attributes {
        assert!(!kv.key.is_empty() && kv.key_strindex == 0);
        assert!(matches!(
            kv.value.as_ref().unwrap().value,
            Some(any_value::Value::StringValue(_))
        ));
    }
    let p = &rp.scope_profiles[0].profiles[0];
    assert!(is_from_chunk(&d, p));
    let pattrs = d.attributes(&p.attribute_indices).unwrap();
    assert!(pattrs.iter().any(
        |a| a.key == "sentry.chunk_id" && a.value.as_str() == Some(chunks[0].chunk_id.as_str())
    ));
    assert!(pattrs.iter().any(|a| a.key == "sentry.thread_metadata"));
    // Locations carry the frame type and the Sentry-only fields.
    let dict = req.dictionary.as_ref().unwrap();
    let loc = &dict.location_table[1];
    let keys: Vec<&str> = d
        .attributes(&loc.attribute_indices)
        .unwrap()
        .iter()
        .map(|a| a.key)
        .collect();
    assert!(keys.contains(&"profile.frame.type"), "{keys:?}");
    assert!(keys.contains(&"sentry.frame.module"), "{keys:?}");
    let ft = d
        .attributes(&loc.attribute_indices)
        .unwrap()
        .into_iter()
        .find(|a| a.key == "profile.frame.type")
        .unwrap();
    assert_eq!(ft.value.as_str(), Some("cpython"));
    // Sample attributes: thread.id as int, thread.name from the metadata.
    let s = &p.samples[0];
    let sa = d.attributes(&s.attribute_indices).unwrap();
    assert!(matches!(sa[0].value, AttrValue::Int(_)));
    assert_eq!(sa[0].key, "thread.id");
}

#[test]
fn linked_samples_are_exactly_those_the_brute_force_rule_finds() {
    let chunks = chunks();
    let txns = transactions();
    let links = TransactionLinks::new(&txns);
    let req = try_to_otlp(
        &SentryInput {
            chunks: &chunks,
            v1_profiles: &[],
        },
        &links,
        &OtlpOptions::default(),
    )
    .unwrap();
    assert_strictly_valid(&req);
    let obs = observations(&req);
    let mut linked = 0;
    for (profiler, thread, t, _, link) in &obs {
        let want = brute_force_link(
            &txns,
            profiler,
            thread,
            *t,
            |txn| txn.root_thread_id(),
            false,
        );
        assert_eq!(*link, want, "profiler {profiler} thread {thread} t {t}");
        linked += usize::from(link.is_some());
    }
    assert!(linked > 100, "only {linked} linked");
    assert!(linked < obs.len());
    // Some samples link to a child span, some only to a root span.
    let roots: HashSet<[u8; 8]> = txns
        .iter()
        .filter_map(|t| hex::<8>(t.contexts.trace.as_ref()?.span_id.as_deref()))
        .collect();
    assert!(
        obs.iter()
            .any(|o| o.4.is_some_and(|(_, s)| roots.contains(&s)))
    );
    assert!(
        obs.iter()
            .any(|o| o.4.is_some_and(|(_, s)| !roots.contains(&s)))
    );
    // The plain function agrees too.
    for (profiler, thread, t, _, link) in obs.iter().step_by(7) {
        assert_eq!(
            profilink_translator::testing::link_sample(&txns, profiler, thread, *t),
            *link
        );
    }
}

#[test]
fn v1_profile_translates_with_links_to_its_own_transaction() {
    let v = v1();
    let input = SentryInput {
        chunks: &[],
        v1_profiles: std::slice::from_ref(&v),
    };
    let req = try_to_otlp(&input, &NoLinks, &OtlpOptions::default()).unwrap();
    assert_strictly_valid(&req);
    let base = v.profile.timestamp.unwrap().as_unix_nanos().unwrap();
    let event_id = v.profile.event_id.clone().unwrap();
    let mut want: Vec<_> = v
        .profile
        .profile
        .samples
        .iter()
        .map(|s| {
            (
                event_id.clone(),
                s.thread_id.clone(),
                base + s.elapsed_since_start_ns,
                sentry_stack(
                    &v.profile.profile.frames,
                    &v.profile.profile.stacks[s.stack_id],
                ),
            )
        })
        .collect();
    want.sort();
    let obs = observations(&req);
    let got: Vec<_> = obs
        .iter()
        .map(|(a, b, c, d, _)| (a.clone(), b.clone(), *c, d.clone()))
        .collect();
    assert_eq!(got, want);
    let txns = [v.transaction.clone().unwrap()];
    let root = v.root_thread_id();
    let mut linked = 0;
    for (_, thread, t, _, link) in &obs {
        let want = brute_force_link(&txns, "", thread, *t, |_| root.clone(), true);
        assert_eq!(*link, want);
        linked += usize::from(link.is_some());
    }
    assert!(linked > 0);

    let d = Dictionary::new(req.dictionary.as_ref());
    let rp = &req.resource_profiles[0];
    let attrs: HashMap<&str, String> = d
        .key_values(&rp.resource.as_ref().unwrap().attributes)
        .unwrap()
        .into_iter()
        .map(|a| (a.key, a.value.to_text().unwrap()))
        .collect();
    assert_eq!(attrs["process.runtime.name"], "CPython");
    assert_eq!(attrs["host.arch"], "amd64");
    assert!(!attrs.contains_key("sentry.profiler_id"));
    let p = &rp.scope_profiles[0].profiles[0];
    assert!(!is_from_chunk(&d, p));
    assert_eq!(hex::encode(&p.profile_id), event_id);
}

#[test]
fn everything_together_is_strictly_valid() {
    let chunks = chunks();
    let v = [v1()];
    let links = TransactionLinks::new(&transactions());
    let t = to_otlp(
        &SentryInput {
            chunks: &chunks,
            v1_profiles: &v,
        },
        &links,
        &OtlpOptions::default(),
    );
    assert!(t.rejected.is_empty());
    assert_strictly_valid(&t.request);
    assert_eq!(t.request.resource_profiles.len(), 3);
}

#[test]
fn fixture_chunks_round_trip_exactly() {
    let chunks = chunks();
    let txns = transactions();
    let req = try_to_otlp(
        &SentryInput {
            chunks: &chunks,
            v1_profiles: &[],
        },
        &TransactionLinks::new(&txns),
        &OtlpOptions::default(),
    )
    .unwrap();
    let restored: Vec<ProfileChunk> = restore_request(&req)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(restored.len(), chunks.len());
    for (orig, back) in chunks.iter().zip(&restored) {
        assert_eq!(canonical_form(back), canonical_form(orig));
        // Everything but the numbering and order of samples/frames/stacks is equal as it is.
        let mut a = orig.clone();
        let mut b = back.clone();
        a.profile = Default::default();
        b.profile = Default::default();
        assert_eq!(a, b);
        assert_eq!(back.profile.thread_metadata, orig.profile.thread_metadata);
        // Timestamps come back as the very same f64s.
        let mut ta: Vec<u64> = orig
            .profile
            .samples
            .iter()
            .map(|s| s.timestamp.to_bits())
            .collect();
        let mut tb: Vec<u64> = back
            .profile
            .samples
            .iter()
            .map(|s| s.timestamp.to_bits())
            .collect();
        ta.sort();
        tb.sort();
        assert_eq!(ta, tb);
        // The restored chunk is itself a valid chunk, in time order.
        assert!(
            back.profile
                .samples
                .is_sorted_by(|x, y| x.timestamp <= y.timestamp)
        );
        let findings: Vec<_> = profilink_proto::validate::validate_chunk(back)
            .into_iter()
            .filter(|f| f.is_error())
            .collect();
        assert!(findings.is_empty(), "{findings:#?}");
    }

    // OTLP -> chunk (+ links) -> OTLP keeps every link.
    let d = Dictionary::new(req.dictionary.as_ref());
    let mut all_links = Vec::new();
    let mut again_chunks = Vec::new();
    for rp in &req.resource_profiles {
        for p in rp.scope_profiles.iter().flat_map(|s| &s.profiles) {
            let (c, l) = restore_chunk_with_links(&d, rp, p).unwrap();
            assert_eq!(c, restore_chunk(&d, rp, p).unwrap());
            again_chunks.push(c);
            all_links.extend(l);
        }
    }
    assert!(!all_links.is_empty());
    let again = try_to_otlp(
        &SentryInput {
            chunks: &again_chunks,
            v1_profiles: &[],
        },
        &ExactLinks::new(&all_links),
        &OtlpOptions::default(),
    )
    .unwrap();
    assert_strictly_valid(&again);
    assert_eq!(observations(&again), observations(&req));
}
