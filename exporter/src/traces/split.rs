//! Splitting of large trace export requests.
//!
//! A request whose protobuf encoding is larger than a limit is cut into several requests that
//! keep the original order of spans: whole `ResourceSpans` are packed greedily; a resource that
//! alone exceeds the limit is cut into copies of itself (same `resource` and `schema_url`)
//! holding consecutive runs of its `ScopeSpans`; a scope that alone exceeds what is left is
//! cut the same way into runs of its spans. Sizes are exact protobuf lengths, so every piece is
//! at most the limit, except a piece holding a single span that is larger by itself (sent alone;
//! the server decides).

use profilink_proto::otlp::ExportTraceServiceRequest;
use profilink_proto::otlp::{ResourceSpans, ScopeSpans};
use prost::Message;
use prost::encoding::{encoded_len_varint, message};

/// Field number of `resource_spans` in the request and of `scope_spans` / `spans` below it.
const RESOURCE_SPANS_TAG: u32 = 1;
const SCOPE_SPANS_TAG: u32 = 2;
const SPANS_TAG: u32 = 2;

/// Number of spans in a request.
pub fn span_count(req: &ExportTraceServiceRequest) -> u64 {
    req.resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len() as u64)
        .sum()
}

/// Greedily packs `items` (in order) into groups whose summed length is at most `budget`; an
/// item larger than `budget` forms a group of its own.
fn pack<T>(items: Vec<T>, len: impl Fn(&T) -> usize, budget: usize) -> Vec<Vec<T>> {
    let mut groups = Vec::new();
    let mut cur: Vec<T> = Vec::new();
    let mut cur_len = 0usize;
    for item in items {
        let l = len(&item);
        if !cur.is_empty() && cur_len.saturating_add(l) > budget {
            groups.push(std::mem::take(&mut cur));
            cur_len = 0;
        }
        cur_len = cur_len.saturating_add(l);
        cur.push(item);
    }
    if !cur.is_empty() {
        groups.push(cur);
    }
    groups
}

/// What is left of `limit` for the fields of a message encoded inside a length-delimited field
/// (one key byte, the length varint) next to its other fields of `shell_len` bytes.
fn inner_budget(limit: usize, shell_len: usize) -> usize {
    limit.saturating_sub(1 + encoded_len_varint(limit as u64) + shell_len)
}

fn split_scope(ss: ScopeSpans, budget: usize) -> Vec<ScopeSpans> {
    let ScopeSpans {
        scope,
        spans,
        schema_url,
    } = ss;
    let shell = ScopeSpans {
        scope,
        spans: Vec::new(),
        schema_url,
    };
    let b = inner_budget(budget, shell.encoded_len());
    pack(spans, |s| message::encoded_len(SPANS_TAG, s), b)
        .into_iter()
        .map(|spans| ScopeSpans {
            spans,
            ..shell.clone()
        })
        .collect()
}

fn split_resource(rs: ResourceSpans, limit: usize) -> Vec<ResourceSpans> {
    let ResourceSpans {
        resource,
        scope_spans,
        schema_url,
    } = rs;
    let shell = ResourceSpans {
        resource,
        scope_spans: Vec::new(),
        schema_url,
    };
    let budget = inner_budget(limit, shell.encoded_len());
    let mut units = Vec::with_capacity(scope_spans.len());
    for ss in scope_spans {
        if message::encoded_len(SCOPE_SPANS_TAG, &ss) <= budget {
            units.push(ss);
        } else {
            units.extend(split_scope(ss, budget));
        }
    }
    pack(
        units,
        |ss| message::encoded_len(SCOPE_SPANS_TAG, ss),
        budget,
    )
    .into_iter()
    .map(|scope_spans| ResourceSpans {
        scope_spans,
        ..shell.clone()
    })
    .collect()
}

/// Splits `req` into requests of at most `limit` encoded bytes (see the module docs);
/// `limit == 0` or a request within the limit gives the request back unchanged.
pub fn split_request(req: ExportTraceServiceRequest, limit: u64) -> Vec<ExportTraceServiceRequest> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if limit == 0 || req.encoded_len() <= limit {
        return vec![req];
    }
    let mut units = Vec::with_capacity(req.resource_spans.len());
    for rs in req.resource_spans {
        if message::encoded_len(RESOURCE_SPANS_TAG, &rs) <= limit {
            units.push(rs);
        } else {
            units.extend(split_resource(rs, limit));
        }
    }
    pack(
        units,
        |rs| message::encoded_len(RESOURCE_SPANS_TAG, rs),
        limit,
    )
    .into_iter()
    .map(|resource_spans| ExportTraceServiceRequest { resource_spans })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::otlp::Resource;
    use profilink_proto::otlp::Span;
    use profilink_proto::otlp::{AnyValue, InstrumentationScope, KeyValue, any_value};

    fn span(id: u8, pad: usize) -> Span {
        Span {
            trace_id: vec![7; 16],
            span_id: vec![id; 8],
            name: format!("span-{id}"),
            attributes: vec![KeyValue {
                key: "pad".into(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue("x".repeat(pad))),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn resource(service: &str, scopes: Vec<(&str, Vec<Span>)>) -> ResourceSpans {
        ResourceSpans {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValue(service.into())),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_spans: scopes
                .into_iter()
                .map(|(name, spans)| ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: name.into(),
                        ..Default::default()
                    }),
                    spans,
                    schema_url: "https://opentelemetry.io/schemas/1.30.0".into(),
                })
                .collect(),
            schema_url: String::new(),
        }
    }

    /// (service, scope, span id) of every span, in order.
    fn flatten(reqs: &[ExportTraceServiceRequest]) -> Vec<(String, String, u8)> {
        let mut out = Vec::new();
        for r in reqs {
            for rs in &r.resource_spans {
                let svc = match rs
                    .resource
                    .as_ref()
                    .and_then(|r| r.attributes.first())
                    .and_then(|kv| kv.value.as_ref())
                    .and_then(|v| v.value.as_ref())
                {
                    Some(any_value::Value::StringValue(s)) => s.clone(),
                    _ => String::new(),
                };
                for ss in &rs.scope_spans {
                    let scope = ss
                        .scope
                        .as_ref()
                        .map(|s| s.name.clone())
                        .unwrap_or_default();
                    for s in &ss.spans {
                        out.push((svc.clone(), scope.clone(), s.span_id[0]));
                    }
                }
            }
        }
        out
    }

    fn sample() -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![
                resource("a", vec![("s1", (0..3).map(|i| span(i, 100)).collect())]),
                resource(
                    "b",
                    vec![
                        ("s2", (10..40).map(|i| span(i, 300)).collect()),
                        ("s3", vec![span(50, 50)]),
                    ],
                ),
                resource("c", vec![("s4", vec![span(60, 5000)])]),
                resource("d", vec![("s5", vec![span(70, 10)])]),
            ],
        }
    }

    #[test]
    fn small_or_unlimited_requests_are_untouched() {
        let req = sample();
        assert_eq!(split_request(req.clone(), 0), vec![req.clone()]);
        let len = req.encoded_len() as u64;
        assert_eq!(split_request(req.clone(), len), vec![req]);
    }

    #[test]
    fn pieces_fit_keep_order_and_resources() {
        let req = sample();
        let limit = 2000u64;
        let pieces = split_request(req.clone(), limit);
        assert!(pieces.len() > 3, "{}", pieces.len());
        for p in &pieces {
            let len = p.encoded_len() as u64;
            let single_big = span_count(p) == 1 && len > limit;
            assert!(len <= limit || single_big, "piece of {len} bytes");
        }
        assert_eq!(flatten(&pieces), flatten(std::slice::from_ref(&req)));
        assert_eq!(pieces.iter().map(span_count).sum::<u64>(), span_count(&req));
        // The oversized span of "c" travels alone.
        let c: Vec<_> = pieces
            .iter()
            .filter(|p| flatten(std::slice::from_ref(p)).iter().any(|f| f.2 == 60))
            .collect();
        assert_eq!(c.len(), 1);
        assert_eq!(span_count(c[0]), 1);
        // Scope copies carry their scope and schema URL.
        for p in &pieces {
            for rs in &p.resource_spans {
                assert!(rs.resource.is_some());
                for ss in &rs.scope_spans {
                    assert!(ss.scope.is_some());
                    assert_eq!(ss.schema_url, "https://opentelemetry.io/schemas/1.30.0");
                }
            }
        }
    }

    #[test]
    fn whole_resources_are_packed_together() {
        let req = ExportTraceServiceRequest {
            resource_spans: (0..10)
                .map(|i| resource(&format!("r{i}"), vec![("s", vec![span(i, 200)])]))
                .collect(),
        };
        let one = message::encoded_len(RESOURCE_SPANS_TAG, &req.resource_spans[0]) as u64;
        let pieces = split_request(req.clone(), one * 3);
        assert_eq!(pieces.len(), 4, "3 + 3 + 3 + 1 resources");
        assert!(pieces.iter().all(|p| p.encoded_len() as u64 <= one * 3));
        assert_eq!(flatten(&pieces), flatten(&[req]));
    }
}
