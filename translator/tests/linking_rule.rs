//! The link rule: innermost covering child span on the thread, else a covering root span that
//! runs on the thread, else nothing; `TransactionLinks` (indexed) == `link_sample` (linear) ==
//! an independent brute force.

use profilink_proto::sentry::Transaction;
use profilink_translator::SampleLink;
use profilink_translator::testing::link_sample;
use profilink_translator::{ExactLinks, LinkSource, NoLinks, TransactionLinks};
use proptest::prelude::*;
use serde_json::{Value, json};

const BASE_US: u64 = 1_795_317_063_000_000;
const PROFILER: &str = "87b148781b0a4a5284a3e3f9cc93e1ec";

fn secs(us: u64) -> f64 {
    (BASE_US + us) as f64 / 1e6
}

fn ns(us: u64) -> u64 {
    (BASE_US + us) * 1000
}

fn span_id(n: u64) -> String {
    format!("{:016x}", n + 1)
}

fn trace_id(n: u64) -> String {
    format!("{:032x}", n + 1)
}

/// A transaction: root on `root_thread` over `[start, end]` µs, and child spans
/// `(id, thread, start, end)`.
fn txn(
    profiler: &str,
    n: u64,
    root_thread: Option<Value>,
    start: u64,
    end: u64,
    spans: &[(u64, Value, u64, u64)],
) -> Transaction {
    let mut data = serde_json::Map::new();
    if let Some(t) = root_thread {
        data.insert("thread.id".into(), t);
    }
    let v = json!({
        "start_timestamp": secs(start),
        "timestamp": secs(end),
        "contexts": {
            "trace": {"trace_id": trace_id(n), "span_id": span_id(1000 + n), "data": data},
            "profile": {"profiler_id": profiler}
        },
        "spans": spans.iter().map(|(id, th, s, e)| json!({
            "span_id": span_id(*id), "start_timestamp": secs(*s), "timestamp": secs(*e),
            "data": {"thread.id": th}
        })).collect::<Vec<_>>()
    });
    Transaction::from_json(&serde_json::to_vec(&v).unwrap()).unwrap()
}

fn span_of(l: Option<([u8; 16], [u8; 8])>) -> Option<String> {
    l.map(|(_, s)| hex::encode(s))
}

#[test]
fn innermost_child_then_root_then_nothing() {
    let t = [txn(
        PROFILER,
        0,
        Some(json!("1")),
        0,
        1000,
        &[
            (1, json!("1"), 100, 500),
            (2, json!("1"), 200, 300),
            (3, json!("1"), 200, 250),
            (4, json!(2), 100, 900),
            (5, Value::Null, 0, 1000),
        ],
    )];
    let links = TransactionLinks::new(&t);
    let at = |thread: &str, us: u64| span_of(links.link(PROFILER, thread, ns(us)));
    assert_eq!(at("1", 50), Some(span_id(1000)), "root covers, no child");
    assert_eq!(at("1", 100), Some(span_id(1)), "closed start");
    assert_eq!(
        at("1", 220),
        Some(span_id(3)),
        "latest start, then shortest"
    );
    assert_eq!(at("1", 260), Some(span_id(2)));
    assert_eq!(at("1", 500), Some(span_id(1)), "closed end");
    assert_eq!(at("1", 501), Some(span_id(1000)));
    assert_eq!(at("1", 1001), None);
    assert_eq!(
        at("2", 150),
        Some(span_id(4)),
        "integer thread ids compare as strings"
    );
    assert_eq!(at("2", 950), None, "the root does not run on thread 2");
    assert_eq!(at("3", 150), None, "span without thread id takes no part");
    assert_eq!(
        links.link("0000000000000000000000000000000f", "1", ns(220)),
        None
    );
    for th in ["1", "2", "3"] {
        for us in (0..1100).step_by(10) {
            assert_eq!(
                links.link(PROFILER, th, ns(us)),
                link_sample(&t, PROFILER, th, ns(us))
            );
        }
    }
    assert!(NoLinks.link(PROFILER, "1", ns(220)).is_none());
}

#[test]
fn invalid_ids_and_times_take_no_part() {
    let mut t = txn(
        PROFILER,
        0,
        Some(json!("1")),
        0,
        1000,
        &[(1, json!("1"), 100, 500), (2, json!("1"), 600, 550)],
    );
    t.spans[0].span_id = Some("xyz".into());
    let links = TransactionLinks::new(std::slice::from_ref(&t));
    assert_eq!(
        span_of(links.link(PROFILER, "1", ns(200))),
        Some(span_id(1000))
    );
    assert_eq!(
        span_of(links.link(PROFILER, "1", ns(560))),
        Some(span_id(1000)),
        "end before start"
    );
    t.contexts.trace.as_mut().unwrap().trace_id = Some("00000000000000000000000000000000".into());
    assert!(
        TransactionLinks::new(&[t])
            .link(PROFILER, "1", ns(200))
            .is_none()
    );
}

#[test]
fn exact_links_replay() {
    let l = SampleLink {
        profiler_id: PROFILER.into(),
        thread_id: "7".into(),
        timestamp_ns: 5,
        trace_id: [1; 16],
        span_id: [2; 8],
    };
    let mut other = l.clone();
    other.span_id = [3; 8];
    let e = ExactLinks::new(&[l, other]);
    assert_eq!(
        e.link(PROFILER, "7", 5),
        Some(([1; 16], [2; 8])),
        "first wins"
    );
    assert_eq!(e.link(PROFILER, "7", 6), None);
    assert_eq!(e.link(PROFILER, "8", 5), None);
    let mut seven = e.thread_links(PROFILER, "7");
    assert_eq!((seven(5), seven(6)), (Some(([1; 16], [2; 8])), None));
    assert_eq!(e.thread_links(PROFILER, "8")(5), None);
}

type Link = Option<([u8; 16], [u8; 8])>;

/// A modelled transaction: profiler, root thread, root start/end (µs), spans (id, thread,
/// start, end).
type ModelTxn = (
    String,
    Option<String>,
    u64,
    u64,
    Vec<(u64, String, u64, u64)>,
);

/// Independent brute force over modelled transactions.
fn brute(txns: &[ModelTxn], n_offset: u64, p: &str, th: &str, us: u64) -> Link {
    let mut child: Option<(u64, u64, Link)> = None;
    let mut root: Option<(u64, u64, Link)> = None;
    let ids = |n: u64, s: u64| {
        let t: [u8; 16] = hex::decode(trace_id(n)).unwrap().try_into().unwrap();
        let sp: [u8; 8] = hex::decode(span_id(s)).unwrap().try_into().unwrap();
        Some((t, sp))
    };
    let better = |b: &Option<(u64, u64, Link)>, s: u64, e: u64| {
        b.as_ref()
            .is_none_or(|(bs, be, _)| s > *bs || (s == *bs && e < *be))
    };
    for (n, (prof, rt, rs, re, spans)) in txns.iter().enumerate() {
        let n = n as u64 + n_offset;
        if prof != p {
            continue;
        }
        for (id, sth, s, e) in spans {
            if sth == th && *s <= us && us <= *e && s <= e && better(&child, *s, *e) {
                child = Some((*s, *e, ids(n, *id)));
            }
        }
        if rt.as_deref() == Some(th)
            && *rs <= us
            && us <= *re
            && rs <= re
            && better(&root, *rs, *re)
        {
            root = Some((*rs, *re, ids(n, 1000 + n)));
        }
    }
    child.or(root).and_then(|(_, _, l)| l)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn indexed_linear_and_brute_force_agree(
        raw in prop::collection::vec(
            (0usize..2, prop::option::of(0usize..3), 0u64..50, 0u64..50,
             prop::collection::vec((0u64..50, 0usize..3, 0u64..50, 0u64..30), 0..6)),
            0..6),
        queries in prop::collection::vec((0usize..2, 0usize..3, 0u64..100), 1..60),
    ) {
        let profilers = [PROFILER, "70d8b2131d7e4d50b13ecc8060c975a2"];
        let threads = ["1", "2", "140357056605056"];
        let mut next_id = 0;
        let model: Vec<_> = raw.into_iter().map(|(p, rt, s, len, spans)| {
            let spans: Vec<_> = spans.into_iter().map(|(s, th, len, _)| {
                next_id += 1;
                (next_id, threads[th].to_owned(), s, s + len)
            }).collect();
            (profilers[p].to_owned(), rt.map(|t| threads[t].to_owned()), s, s + len, spans)
        }).collect();
        let txns: Vec<Transaction> = model.iter().enumerate().map(|(n, (p, rt, s, e, spans))| {
            let spans: Vec<_> = spans.iter().map(|(id, th, s, e)| (*id, json!(th), *s, *e)).collect();
            txn(p, n as u64, rt.clone().map(Value::String), *s, *e, &spans)
        }).collect();
        let links = TransactionLinks::new(&txns);
        let mut cursors: Vec<_> = profilers
            .iter()
            .flat_map(|p| threads.iter().map(move |t| (p, t)))
            .map(|(p, t)| links.thread_links(p, t))
            .collect();
        for (p, th, us) in queries {
            let indexed = links.link(profilers[p], threads[th], ns(us));
            prop_assert_eq!(indexed, link_sample(&txns, profilers[p], threads[th], ns(us)));
            prop_assert_eq!(indexed, brute(&model, 0, profilers[p], threads[th], us));
            // The per-thread cursor (queries in any order) answers the same.
            prop_assert_eq!(cursors[p * threads.len() + th](ns(us)), indexed);
        }
    }
}

#[test]
fn span_items_take_part_like_transaction_spans() {
    use profilink_proto::sentry::SpanItem;
    use profilink_translator::{LinkSource, TransactionLinks, span_item_interval};
    let profiler = "aa".repeat(16);
    let item = |attrs: serde_json::Value, segment: bool| {
        SpanItem::from_v2_value(&serde_json::json!({
            "trace_id": "0123456789abcdef0123456789abcdef",
            "span_id": if segment { "1111111111111111" } else { "2222222222222222" },
            "is_segment": segment,
            "start_timestamp": 100.0,
            "end_timestamp": if segment { 110.0 } else { 105.0 },
            "attributes": attrs,
        }))
        .unwrap()
    };
    let attrs = serde_json::json!({
        "sentry.profiler_id": {"type": "string", "value": profiler},
        "thread.id": {"type": "integer", "value": 77},
    });
    let segment = span_item_interval(&item(attrs.clone(), true)).expect("linkable");
    let child = span_item_interval(&item(attrs, false)).expect("linkable");
    assert!(segment.is_root && !child.is_root);
    assert_eq!(
        (child.thread_id.as_str(), child.start_ns, child.end_ns),
        ("77", 100_000_000_000, 105_000_000_000)
    );
    let links = TransactionLinks::from_intervals([segment, child]);
    // The child wins inside its range, the segment (root) after it.
    assert_eq!(
        links.link(&profiler, "77", 104_000_000_000).unwrap().1,
        [0x22; 8]
    );
    assert_eq!(
        links.link(&profiler, "77", 107_000_000_000).unwrap().1,
        [0x11; 8]
    );
    assert_eq!(links.link(&profiler, "78", 104_000_000_000), None);
    // Without a profiler id or a thread id the item takes no part.
    let no_profiler = item(serde_json::json!({"thread.id": 77}), false);
    assert!(span_item_interval(&no_profiler).is_none());
    let no_thread = item(serde_json::json!({"sentry.profiler_id": profiler}), false);
    assert!(span_item_interval(&no_thread).is_none());
}
