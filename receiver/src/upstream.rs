//! What the Sentry receiver's upstream rate limits are matched by: the Sentry data category of
//! an envelope item, and the bounded `type` label of the item counters. (The upstream contract
//! itself, [`Upstream`](profilink_consumer::Upstream), is the contract crate's.)

/// The Sentry data category that rate-limits an envelope item, as Relay assigns them; `None`
/// for items no quota applies to (client reports, unknown types).
pub fn item_category(item_type: &str, platform: Option<&str>) -> Option<&'static str> {
    Some(match item_type {
        "event" | "security" | "raw_security" | "unreal_report" | "nel" => "error",
        "transaction" => "transaction",
        "session" | "sessions" => "session",
        "attachment" => "attachment",
        "user_report" | "feedback" => "user_report_v2",
        "profile" => "profile",
        "profile_chunk" | "profile_chunk_ui" => match platform {
            Some("cocoa" | "android" | "javascript") => "profile_chunk_ui",
            _ if item_type == "profile_chunk_ui" => "profile_chunk_ui",
            _ => "profile_chunk",
        },
        "replay_event" | "replay_recording" | "replay_video" => "replay",
        "check_in" => "monitor",
        "span" | "otel_span" => "span",
        "log" | "otel_log" => "log_item",
        "trace_metric" => "trace_metric",
        _ => return None,
    })
}

/// The `type` label of an item for the receiver's item counters: known Sentry item types as
/// they are, anything else `other` (labels stay bounded whatever SDKs send).
pub fn item_type_label(item_type: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "event",
        "transaction",
        "security",
        "raw_security",
        "attachment",
        "session",
        "sessions",
        "user_report",
        "feedback",
        "client_report",
        "profile",
        "profile_chunk",
        "profile_chunk_ui",
        "replay_event",
        "replay_recording",
        "replay_video",
        "check_in",
        "span",
        "otel_span",
        "log",
        "otel_log",
        "statsd",
        "metric_buckets",
        "trace_metric",
        "nel",
        "unreal_report",
    ];
    KNOWN
        .iter()
        .find(|k| **k == item_type)
        .copied()
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_and_labels() {
        assert_eq!(item_category("event", None), Some("error"));
        assert_eq!(
            item_category("profile_chunk", Some("python")),
            Some("profile_chunk")
        );
        assert_eq!(
            item_category("profile_chunk", Some("cocoa")),
            Some("profile_chunk_ui")
        );
        assert_eq!(item_category("client_report", None), None);
        assert_eq!(item_type_label("event"), "event");
        assert_eq!(item_type_label("x-custom"), "other");
    }
}
