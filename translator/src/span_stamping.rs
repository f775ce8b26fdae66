//! OTLP → Sentry trace linking on the span side: Sentry finds a span's profile by
//! `sentry.profiler_id` + `thread.id` + the span's time range (Sentry ingestion notes §2), so
//! spans sent to Sentry's OTLP traces endpoint need those two attributes.
//!
//! * [`SpanThreads`] remembers, from translated profiles, which profiler session and thread
//!   the samples linked to each span ran on (the [`SampleLink`]s OTLP → Sentry translation
//!   returns beside its chunks): the first sample seen for a span decides.
//! * [`stamp_traces`] sets, on every span of a request:
//!   * `sentry.profiler_id`: from the span's linked samples when known, else derived from the
//!     span's resource attributes by [`resource_profiler_id`] (the same derivation the profile
//!     translation applies to a process's resource, so traces and profiles of one process
//!     agree); a span that already has one keeps it;
//!   * `thread.id` (an int, as OpenTelemetry's semantic conventions type it; its decimal text
//!     is the chunk's `thread_id`): from the linked samples, only when the span has none.

use crate::SampleLink;
use crate::otlp_to_sentry::{PROFILER_ID_KEY, ProcessIdentity, derive_profiler_id};
use profilink_proto::otlp::ExportTraceServiceRequest;
use profilink_proto::otlp::{AnyValue, KeyValue, any_value};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// The span attribute holding the thread id.
pub const THREAD_ID_KEY: &str = "thread.id";

/// A trace id and span id.
type SpanKey = ([u8; 16], [u8; 8]);

/// Where a span's linked samples ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanThread {
    /// Sentry profiler id.
    pub profiler_id: String,
    /// Sentry thread id (decimal string).
    pub thread_id: String,
}

/// Bounded memory of span → (profiler, thread) from profile sample links. See the module docs.
#[derive(Debug)]
pub struct SpanThreads {
    map: HashMap<SpanKey, SpanThread>,
    /// Insertion order with time, for expiry and the size bound.
    order: VecDeque<(Instant, SpanKey)>,
    max: usize,
    retention: Duration,
}

impl SpanThreads {
    /// An empty memory of at most `max` spans, each kept for `retention`.
    pub fn new(max: usize, retention: Duration) -> Self {
        SpanThreads {
            map: HashMap::new(),
            order: VecDeque::new(),
            max: max.max(1),
            retention,
        }
    }

    /// Spans remembered.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Records the spans of `links` seen at `now` (a span already known keeps its thread), then
    /// forgets what is past the retention or beyond the bound (oldest first).
    pub fn record(&mut self, links: &[SampleLink], now: Instant) {
        for l in links {
            let key = (l.trace_id, l.span_id);
            if self.map.contains_key(&key) {
                continue;
            }
            self.map.insert(
                key,
                SpanThread {
                    profiler_id: l.profiler_id.clone(),
                    thread_id: l.thread_id.clone(),
                },
            );
            self.order.push_back((now, key));
        }
        self.expire(now);
    }

    /// Forgets spans recorded more than the retention before `now`, and the oldest beyond the
    /// bound.
    pub fn expire(&mut self, now: Instant) {
        while let Some((at, key)) = self.order.front().copied() {
            let old = now.saturating_duration_since(at) >= self.retention;
            if !old && self.order.len() <= self.max {
                break;
            }
            self.order.pop_front();
            self.map.remove(&key);
        }
    }

    /// Where the samples linked to span `(trace_id, span_id)` ran, if known.
    pub fn get(&self, trace_id: &[u8], span_id: &[u8]) -> Option<&SpanThread> {
        let key: SpanKey = (trace_id.try_into().ok()?, span_id.try_into().ok()?);
        self.map.get(&key)
    }
}

/// The text of a scalar attribute value, as the profile translation reads it.
fn value_text(v: &AnyValue) -> Option<String> {
    match v.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        any_value::Value::BoolValue(b) => Some(b.to_string()),
        any_value::Value::DoubleValue(d) => Some(d.to_string()),
        _ => None,
    }
    .filter(|s| !s.is_empty())
}

/// The profiler id of the process a resource with `attributes` describes: the same
/// derivation [`derive_profiler_id`] applies to a profile's resource (an explicit
/// `sentry.profiler_id`, else a hash of the process identity attributes).
pub fn resource_profiler_id(attributes: &[KeyValue]) -> String {
    let text: Vec<(String, String)> = attributes
        .iter()
        .filter_map(|kv| Some((kv.key.clone(), value_text(kv.value.as_ref()?)?)))
        .collect();
    derive_profiler_id(&ProcessIdentity::from_text_layers(&text, &[]))
}

/// What [`stamp_traces`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StampStats {
    /// Spans seen.
    pub spans: u64,
    /// Spans given a `sentry.profiler_id` from their linked samples.
    pub profiler_from_samples: u64,
    /// Spans given a `sentry.profiler_id` derived from their resource.
    pub profiler_from_resource: u64,
    /// Spans given a `thread.id`.
    pub thread_ids: u64,
}

fn has_attribute(attrs: &[KeyValue], key: &str) -> bool {
    attrs
        .iter()
        .any(|kv| kv.key == key && kv.value.as_ref().and_then(value_text).is_some())
}

fn string_attr(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
        ..Default::default()
    }
}

/// Stamps every span of `req` (see the module docs).
pub fn stamp_traces(req: &mut ExportTraceServiceRequest, known: &SpanThreads) -> StampStats {
    let mut stats = StampStats::default();
    for rs in &mut req.resource_spans {
        let attrs = rs.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        let derived = resource_profiler_id(attrs);
        for ss in &mut rs.scope_spans {
            for span in &mut ss.spans {
                stats.spans += 1;
                let seen = known.get(&span.trace_id, &span.span_id);
                if !has_attribute(&span.attributes, PROFILER_ID_KEY) {
                    let id = match seen {
                        Some(s) => {
                            stats.profiler_from_samples += 1;
                            s.profiler_id.clone()
                        }
                        None => {
                            stats.profiler_from_resource += 1;
                            derived.clone()
                        }
                    };
                    span.attributes.push(string_attr(PROFILER_ID_KEY, id));
                }
                if let Some(s) = seen
                    && !has_attribute(&span.attributes, THREAD_ID_KEY)
                {
                    let value = match s.thread_id.parse::<i64>() {
                        Ok(i) => any_value::Value::IntValue(i),
                        Err(_) => any_value::Value::StringValue(s.thread_id.clone()),
                    };
                    span.attributes.push(KeyValue {
                        key: THREAD_ID_KEY.to_string(),
                        value: Some(AnyValue { value: Some(value) }),
                        ..Default::default()
                    });
                    stats.thread_ids += 1;
                }
            }
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::otlp::Resource;
    use profilink_proto::otlp::{ResourceSpans, ScopeSpans, Span};

    fn link(trace: u8, span: u8, thread: &str) -> SampleLink {
        SampleLink {
            profiler_id: "a".repeat(32),
            thread_id: thread.into(),
            timestamp_ns: 1,
            trace_id: [trace; 16],
            span_id: [span; 8],
        }
    }

    fn kv(k: &str, v: any_value::Value) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue { value: Some(v) }),
            ..Default::default()
        }
    }

    fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a any_value::Value> {
        span.attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref()?.value.as_ref())
    }

    #[test]
    fn memory_is_bounded_and_expires() {
        let t0 = Instant::now();
        let mut m = SpanThreads::new(2, Duration::from_secs(10));
        m.record(&[link(1, 1, "7"), link(1, 1, "8"), link(1, 2, "9")], t0);
        assert_eq!(
            m.get(&[1; 16], &[1; 8]).unwrap().thread_id,
            "7",
            "first wins"
        );
        m.record(&[link(1, 3, "5")], t0 + Duration::from_secs(1));
        assert_eq!(m.len(), 2);
        assert!(m.get(&[1; 16], &[1; 8]).is_none(), "oldest evicted");
        assert!(m.get(&[1; 15], &[1; 8]).is_none(), "bad id length");
        m.expire(t0 + Duration::from_secs(10));
        assert_eq!(m.len(), 1, "span 2 expired");
        m.expire(t0 + Duration::from_secs(11));
        assert!(m.is_empty());
    }

    #[test]
    fn stamps_from_samples_or_resource_and_keeps_what_is_there() {
        let mut known = SpanThreads::new(100, Duration::from_secs(60));
        known.record(&[link(1, 1, "4242"), link(1, 2, "main")], Instant::now());
        let resource_attrs = vec![
            kv("host.name", any_value::Value::StringValue("h".into())),
            kv("process.pid", any_value::Value::IntValue(12)),
            kv(
                "telemetry.sdk.name",
                any_value::Value::StringValue("x".into()),
            ),
        ];
        let span = |s: u8, attrs: Vec<KeyValue>| Span {
            trace_id: vec![1; 16],
            span_id: vec![s; 8],
            attributes: attrs,
            ..Default::default()
        };
        let mut req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: resource_attrs.clone(),
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans: vec![
                        span(1, vec![]),
                        span(2, vec![]),
                        span(3, vec![]),
                        span(
                            1,
                            vec![
                                kv(
                                    PROFILER_ID_KEY,
                                    any_value::Value::StringValue("b".repeat(32)),
                                ),
                                kv(THREAD_ID_KEY, any_value::Value::IntValue(1)),
                            ],
                        ),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let stats = stamp_traces(&mut req, &known);
        assert_eq!(
            stats,
            StampStats {
                spans: 4,
                profiler_from_samples: 2,
                profiler_from_resource: 1,
                thread_ids: 2
            }
        );
        let spans = &req.resource_spans[0].scope_spans[0].spans;
        let derived = resource_profiler_id(&resource_attrs);
        // The derivation is the profile translation's for the same attributes.
        let same = derive_profiler_id(&ProcessIdentity::from_text_layers(
            &[
                ("host.name".into(), "h".into()),
                ("process.pid".into(), "12".into()),
                ("telemetry.sdk.name".into(), "x".into()),
            ],
            &[],
        ));
        assert_eq!(derived, same);
        let pid = |s: &Span| match attr(s, PROFILER_ID_KEY) {
            Some(any_value::Value::StringValue(v)) => v.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(pid(&spans[0]), "a".repeat(32));
        assert_eq!(
            attr(&spans[0], THREAD_ID_KEY),
            Some(&any_value::Value::IntValue(4242))
        );
        assert_eq!(
            attr(&spans[1], THREAD_ID_KEY),
            Some(&any_value::Value::StringValue("main".into()))
        );
        assert_eq!(pid(&spans[2]), derived);
        assert_eq!(
            attr(&spans[2], THREAD_ID_KEY),
            None,
            "no samples: no thread"
        );
        assert_eq!(pid(&spans[3]), "b".repeat(32), "kept");
        assert_eq!(
            attr(&spans[3], THREAD_ID_KEY),
            Some(&any_value::Value::IntValue(1))
        );
        assert_eq!(spans[3].attributes.len(), 2);
    }
}
