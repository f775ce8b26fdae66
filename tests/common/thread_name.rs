//! A request with its first `thread.name` attribute value replaced: the stray-byte tests
//! (issue 43) start from a clean name of the same length as the corrupted one, so the
//! encoding's framing does not move when one byte is changed afterwards.

use profilink_proto::otlp::{ExportProfilesServiceRequest, any_value};

/// `req` with the value of its first `thread.name` attribute set to `name`.
pub fn with_thread_name(
    req: &ExportProfilesServiceRequest,
    name: &str,
) -> ExportProfilesServiceRequest {
    let mut r = req.clone();
    let d = r.dictionary.as_mut().unwrap();
    let key = d
        .string_table
        .iter()
        .position(|s| s == "thread.name")
        .unwrap() as i32;
    let a = d
        .attribute_table
        .iter_mut()
        .find(|a| a.key_strindex == key)
        .unwrap();
    a.value.as_mut().unwrap().value = Some(any_value::Value::StringValue(name.into()));
    r
}
