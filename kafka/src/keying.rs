//! How the exporter cuts requests into Kafka messages and keys them.
//!
//! * Profiles ([`split_profiles`]): one message per profiler session, keyed with the session's
//!   profiler id, the id the translator derives from a resource's attributes
//!   ([`profilink_translator::otlp_to_sentry::resource_profiler_id`]: an explicit `sentry.profiler_id`, else a
//!   hash of the process identity). Kafka's default partitioner maps a key to one partition,
//!   so a downstream consumer group sees every message of a session on one consumer, where
//!   its chunks merge (as behind nginx with session affinity). Each message keeps the
//!   request's whole dictionary (the resources index into it); unkeyed, the request is one
//!   message.
//! * Traces ([`split_traces`]): one message per trace id, keyed with the trace id's hex, as
//!   the Collector's `partition_traces_by_id`; unkeyed, the request is one message.

use profilink_proto::otlp::{
    ExportProfilesServiceRequest, ExportTraceServiceRequest, ResourceSpans, ScopeSpans,
};
use profilink_translator::otlp_to_sentry::resource_profiler_id;
use std::collections::BTreeMap;

/// Splits `request` into one request per profiler session, with its key, in the order the
/// sessions first appear. Resources of one session stay in one request.
pub fn split_profiles(
    request: ExportProfilesServiceRequest,
) -> Vec<(String, ExportProfilesServiceRequest)> {
    let ExportProfilesServiceRequest {
        resource_profiles,
        dictionary,
    } = request;
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for rp in resource_profiles {
        let key = resource_profiler_id(dictionary.as_ref(), &rp);
        let group = groups.entry(key.clone()).or_default();
        if group.is_empty() {
            order.push(key);
        }
        group.push(rp);
    }
    order
        .into_iter()
        .filter_map(|key| {
            let resource_profiles = groups.remove(&key)?;
            Some((
                key,
                ExportProfilesServiceRequest {
                    resource_profiles,
                    dictionary: dictionary.clone(),
                },
            ))
        })
        .collect()
}

/// Splits `request` into one request per trace id (hex-encoded, the key), keeping each
/// span's resource and scope; spans without a valid trace id go under the key `""`.
pub fn split_traces(
    request: ExportTraceServiceRequest,
) -> Vec<(String, ExportTraceServiceRequest)> {
    let mut out: BTreeMap<String, ExportTraceServiceRequest> = BTreeMap::new();
    for rs in request.resource_spans {
        let ResourceSpans {
            resource,
            scope_spans,
            schema_url,
        } = rs;
        // trace id -> this resource's scopes holding its spans.
        let mut per_trace: BTreeMap<String, Vec<ScopeSpans>> = BTreeMap::new();
        for ss in scope_spans {
            let mut by_trace: BTreeMap<String, ScopeSpans> = BTreeMap::new();
            for span in ss.spans {
                let key = if span.trace_id.len() == 16 {
                    hex(&span.trace_id)
                } else {
                    String::new()
                };
                by_trace
                    .entry(key)
                    .or_insert_with(|| ScopeSpans {
                        scope: ss.scope.clone(),
                        spans: Vec::new(),
                        schema_url: ss.schema_url.clone(),
                    })
                    .spans
                    .push(span);
            }
            for (key, scoped) in by_trace {
                per_trace.entry(key).or_default().push(scoped);
            }
        }
        for (key, scope_spans) in per_trace {
            out.entry(key)
                .or_default()
                .resource_spans
                .push(ResourceSpans {
                    resource: resource.clone(),
                    scope_spans,
                    schema_url: schema_url.clone(),
                });
        }
    }
    out.into_iter().collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::otlp::{AnyValue, KeyValue, Resource, ResourceProfiles, Span, any_value};

    fn resource(pid: i64) -> Resource {
        Resource {
            attributes: vec![
                KeyValue {
                    key: "process.pid".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::IntValue(pid)),
                    }),
                    ..Default::default()
                },
                KeyValue {
                    key: "host.name".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValue("h".into())),
                    }),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn profiles_split_per_session_in_order() {
        let rp = |pid| ResourceProfiles {
            resource: Some(resource(pid)),
            ..Default::default()
        };
        let req = ExportProfilesServiceRequest {
            resource_profiles: vec![rp(2), rp(1), rp(2)],
            dictionary: None,
        };
        let parts = split_profiles(req);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].1.resource_profiles.len(), 2);
        assert_eq!(parts[1].1.resource_profiles.len(), 1);
        assert_ne!(parts[0].0, parts[1].0);
        assert!(parts.iter().all(|(k, _)| !k.is_empty()));
        let again = split_profiles(ExportProfilesServiceRequest {
            resource_profiles: vec![rp(1)],
            dictionary: None,
        });
        assert_eq!(again[0].0, parts[1].0, "the same process gets the same key");
    }

    #[test]
    fn traces_split_per_trace_id() {
        let span = |t: u8| Span {
            trace_id: vec![t; 16],
            span_id: vec![1; 8],
            ..Default::default()
        };
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(resource(1)),
                scope_spans: vec![ScopeSpans {
                    spans: vec![span(1), span(2), span(1)],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let parts = split_traces(req);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].0, "01".repeat(16));
        assert_eq!(parts[0].1.resource_spans[0].scope_spans[0].spans.len(), 2);
        assert_eq!(parts[1].1.resource_spans[0].scope_spans[0].spans.len(), 1);
    }
}
