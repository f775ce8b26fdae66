//! prost messages → OTLP/JSON for the OTLP traces protos, with the shared writers of
//! [`crate::otlp_json::encode`] (the same rules as the profiles encoder): keys in
//! field-number order, trace and span ids as lowercase hex, 64-bit integers as strings, enums
//! as integers, defaults omitted, present messages written (as `{}` when empty).

use crate::otlp::{ResourceSpans, Span, Status, span};
use crate::otlp_json::encode::{Obj, envelope, key_value, resource, scope};

/// Encodes a `TracesData` / `ExportTraceServiceRequest` document.
pub fn traces_data(resource_spans: &[ResourceSpans]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024);
    let mut o = Obj::new(&mut out);
    o.list("resourceSpans", resource_spans, |out, m| {
        envelope(out, m, resource, |out, m| envelope(out, m, scope, span_msg))
    });
    o.end();
    out
}

fn span_msg(out: &mut Vec<u8>, m: &Span) {
    let mut o = Obj::new(out);
    o.hex("traceId", &m.trace_id);
    o.hex("spanId", &m.span_id);
    o.string("traceState", &m.trace_state);
    o.hex("parentSpanId", &m.parent_span_id);
    o.string("name", &m.name);
    o.i32("kind", m.kind);
    o.u64("startTimeUnixNano", m.start_time_unix_nano);
    o.u64("endTimeUnixNano", m.end_time_unix_nano);
    o.list("attributes", &m.attributes, key_value);
    o.u32("droppedAttributesCount", m.dropped_attributes_count);
    o.list("events", &m.events, event);
    o.u32("droppedEventsCount", m.dropped_events_count);
    o.list("links", &m.links, link);
    o.u32("droppedLinksCount", m.dropped_links_count);
    o.msg("status", m.status.as_ref(), status_msg);
    o.u32("flags", m.flags);
    o.end();
}

fn event(out: &mut Vec<u8>, m: &span::Event) {
    let mut o = Obj::new(out);
    o.u64("timeUnixNano", m.time_unix_nano);
    o.string("name", &m.name);
    o.list("attributes", &m.attributes, key_value);
    o.u32("droppedAttributesCount", m.dropped_attributes_count);
    o.end();
}

fn link(out: &mut Vec<u8>, m: &span::Link) {
    let mut o = Obj::new(out);
    o.hex("traceId", &m.trace_id);
    o.hex("spanId", &m.span_id);
    o.string("traceState", &m.trace_state);
    o.list("attributes", &m.attributes, key_value);
    o.u32("droppedAttributesCount", m.dropped_attributes_count);
    o.u32("flags", m.flags);
    o.end();
}

fn status_msg(out: &mut Vec<u8>, m: &Status) {
    let mut o = Obj::new(out);
    o.string("message", &m.message);
    o.i32("code", m.code);
    o.end();
}
