//! OTLP/JSON → prost messages for the OTLP traces protos (`opentelemetry.proto.trace.v1` and
//! the trace collector service), with the shared readers of [`crate::otlp_json::decode`] (the
//! same rules as the profiles decoder).
//!
//! Enums (`Span.kind`, `Status.code`) are written as integers by OTLP/JSON; as proto3 JSON
//! allows, their value names (`"SPAN_KIND_SERVER"`) are accepted too. Unknown names are errors;
//! unknown numbers are kept, as protobuf keeps them.

use crate::otlp::{ResourceSpans, ScopeSpans, Span, Status, span, status};
use crate::otlp_json::decode::{
    attributes_field, envelope, repeated, resource, scope, set, span_id, string, trace_id, u32v,
    u64v,
};
use crate::otlp_json::numbers::{IntType, parse_int};
use crate::otlp_json::parser::{Parser, Result, Scalar};
use crate::otlp_json::{OtlpJsonError, shown};

/// Decodes a whole `TracesData` / `ExportTraceServiceRequest` document (one field,
/// `resourceSpans`).
pub fn traces_data(bytes: &[u8]) -> std::result::Result<Vec<ResourceSpans>, OtlpJsonError> {
    let mut p = Parser::new(bytes);
    let mut resource_spans = Vec::new();
    let mut it = p.begin_object("a traces request object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "resourceSpans" | "resource_spans" => {
                set!(&mut p, "resourceSpans", resource_spans, |p| repeated(
                    p,
                    |p| envelope::<ResourceSpans>(p, resource, |p| envelope::<ScopeSpans>(
                        p, scope, span_msg
                    ))
                ))
            }
            _ => p.skip_value()?,
        }
    }
    p.finish()?;
    Ok(resource_spans)
}

fn span_msg(p: &mut Parser<'_>) -> Result<Span> {
    let mut m = Span::default();
    let mut it = p.begin_object("a Span object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "traceId" | "trace_id" => set!(p, "traceId", m.trace_id, trace_id),
            "spanId" | "span_id" => set!(p, "spanId", m.span_id, span_id),
            "traceState" | "trace_state" => set!(p, "traceState", m.trace_state, string),
            "parentSpanId" | "parent_span_id" => {
                set!(p, "parentSpanId", m.parent_span_id, span_id)
            }
            "flags" => set!(p, "flags", m.flags, u32v),
            "name" => set!(p, "name", m.name, string),
            "kind" => set!(p, "kind", m.kind, |p| enum_value(p, span_kind_from_name)),
            "startTimeUnixNano" | "start_time_unix_nano" => {
                set!(p, "startTimeUnixNano", m.start_time_unix_nano, u64v)
            }
            "endTimeUnixNano" | "end_time_unix_nano" => {
                set!(p, "endTimeUnixNano", m.end_time_unix_nano, u64v)
            }
            "events" => set!(p, "events", m.events, |p| repeated(p, event)),
            "droppedEventsCount" | "dropped_events_count" => {
                set!(p, "droppedEventsCount", m.dropped_events_count, u32v)
            }
            "links" => set!(p, "links", m.links, |p| repeated(p, link)),
            "droppedLinksCount" | "dropped_links_count" => {
                set!(p, "droppedLinksCount", m.dropped_links_count, u32v)
            }
            "status" => set!(p, "status", m.status, |p| status_msg(p).map(Some)),
            k if attributes_field(p, k, &mut m.attributes, &mut m.dropped_attributes_count)? => {}
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn event(p: &mut Parser<'_>) -> Result<span::Event> {
    let mut m = span::Event::default();
    let mut it = p.begin_object("an Event object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "timeUnixNano" | "time_unix_nano" => set!(p, "timeUnixNano", m.time_unix_nano, u64v),
            "name" => set!(p, "name", m.name, string),
            k if attributes_field(p, k, &mut m.attributes, &mut m.dropped_attributes_count)? => {}
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn link(p: &mut Parser<'_>) -> Result<span::Link> {
    let mut m = span::Link::default();
    let mut it = p.begin_object("a Link object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "traceId" | "trace_id" => set!(p, "traceId", m.trace_id, trace_id),
            "spanId" | "span_id" => set!(p, "spanId", m.span_id, span_id),
            "traceState" | "trace_state" => set!(p, "traceState", m.trace_state, string),
            "flags" => set!(p, "flags", m.flags, u32v),
            k if attributes_field(p, k, &mut m.attributes, &mut m.dropped_attributes_count)? => {}
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn status_msg(p: &mut Parser<'_>) -> Result<Status> {
    let mut m = Status::default();
    let mut it = p.begin_object("a Status object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "message" => set!(p, "message", m.message, string),
            "code" => set!(p, "code", m.code, |p| enum_value(p, status_code_from_name)),
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn span_kind_from_name(name: &str) -> Option<i32> {
    span::SpanKind::from_str_name(name).map(|k| k as i32)
}

fn status_code_from_name(name: &str) -> Option<i32> {
    status::StatusCode::from_str_name(name).map(|c| c as i32)
}

/// An enum: an integer (number or numeric string, any int32 value) or a value name.
fn enum_value(p: &mut Parser<'_>, from_name: fn(&str) -> Option<i32>) -> Result<i32> {
    let what = "an enum (integer or value name)";
    let r = match p.scalar(what)? {
        Scalar::Num(t) => parse_int(t, IntType::I32),
        Scalar::Str(s) => match from_name(&s) {
            Some(v) => return Ok(v),
            None => {
                parse_int(&s, IntType::I32).map_err(|_| format!("unknown enum value {}", shown(&s)))
            }
        },
        Scalar::Bool(_) => Err(format!("expected {what}, found a boolean")),
    };
    let v = r.map_err(|m| p.error(m))?;
    i32::try_from(v).map_err(|_| p.error("out of range for an enum (int32)"))
}
