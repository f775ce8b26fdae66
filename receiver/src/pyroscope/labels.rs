//! Pyroscope's application names and labels, and the resource attributes they become.
//!
//! * `/ingest`'s `name` is `app{k=v,...}` (Pyroscope's label-set syntax): the application name
//!   and its labels. A name ending in a profile type Pyroscope knows (`myapp.cpu`,
//!   `myapp.alloc_space`, …) names that type; the application is the name before it.
//! * `service.name` is the `service_name` label when there is one (the application name is
//!   then kept as `app_name`, as Alloy keeps it), else the application name.
//! * Every other label is kept as a resource attribute of the same name.

/// The profile types Pyroscope names after an application's last `.`, with the sample type
/// and unit each stands for (Pyroscope's own table for its legacy formats).
const TYPES: &[(&str, &str, &str)] = &[
    ("cpu", "samples", "count"),
    ("itimer", "samples", "count"),
    ("wall", "samples", "count"),
    ("inuse_objects", "inuse_objects", "count"),
    ("inuse_space", "inuse_space", "bytes"),
    ("alloc_objects", "alloc_objects", "count"),
    ("alloc_space", "alloc_space", "bytes"),
    ("goroutines", "goroutine", "count"),
    ("mutex_count", "contentions", "count"),
    ("mutex_duration", "delay", "nanoseconds"),
    ("block_count", "contentions", "count"),
    ("block_duration", "delay", "nanoseconds"),
    ("lock_count", "contentions", "count"),
    ("lock_duration", "delay", "nanoseconds"),
    (
        "alloc_in_new_tlab_objects",
        "alloc_in_new_tlab_objects",
        "count",
    ),
    (
        "alloc_in_new_tlab_bytes",
        "alloc_in_new_tlab_bytes",
        "bytes",
    ),
    (
        "alloc_outside_tlab_objects",
        "alloc_outside_tlab_objects",
        "count",
    ),
    (
        "alloc_outside_tlab_bytes",
        "alloc_outside_tlab_bytes",
        "bytes",
    ),
    ("live", "live", "count"),
    ("exceptions", "exceptions", "count"),
];

/// A parsed `name` query value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppName {
    /// The application (the name without its profile type).
    pub app: String,
    /// The profile type the name ends in (`cpu`, `alloc_space`, …), when it names one.
    pub profile_type: Option<&'static str>,
    /// The labels, in order.
    pub labels: Vec<(String, String)>,
}

impl AppName {
    /// Parses `app{k=v,...}` (the braces are optional; keys and values are trimmed; a key
    /// repeated keeps its last value).
    pub(crate) fn parse(name: &str) -> Result<AppName, String> {
        let (full, labels) = match name.find('{') {
            None => (name.trim(), Vec::new()),
            Some(open) => {
                let rest = name[open + 1..].trim_end();
                let Some(inner) = rest.strip_suffix('}') else {
                    return Err(format!("{name:?}: the labels are not closed with '}}'"));
                };
                (name[..open].trim(), parse_labels(inner, name)?)
            }
        };
        if full.is_empty() {
            return Err(format!("{name:?}: no application name"));
        }
        let (app, profile_type) = match full.rsplit_once('.') {
            Some((app, suffix)) if !app.is_empty() => {
                match TYPES.iter().find(|(t, _, _)| *t == suffix) {
                    Some((t, _, _)) => (app.to_string(), Some(*t)),
                    None => (full.to_string(), None),
                }
            }
            _ => (full.to_string(), None),
        };
        Ok(AppName {
            app,
            profile_type,
            labels,
        })
    }

    /// The sample type and unit the name's profile type stands for, if it names one.
    pub(crate) fn sample_type(&self) -> Option<(&'static str, &'static str)> {
        let t = self.profile_type?;
        TYPES
            .iter()
            .find(|(name, _, _)| *name == t)
            .map(|(_, ty, unit)| (*ty, *unit))
    }
}

fn parse_labels(inner: &str, name: &str) -> Result<Vec<(String, String)>, String> {
    let mut labels: Vec<(String, String)> = Vec::new();
    for pair in inner.split(',') {
        if pair.trim().is_empty() {
            continue;
        }
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!("{name:?}: label {pair:?} is not key=value"));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(format!("{name:?}: label {pair:?} has no key"));
        }
        labels.retain(|(key, _)| key != k);
        labels.push((k.to_string(), v.to_string()));
    }
    Ok(labels)
}

/// The resource attributes of a profile from `app` (when known) with `labels`: `service.name`
/// from the `service_name` label or the application, `app_name` when both are there, every
/// other label as it is.
pub(crate) fn resource_attributes(
    app: Option<&str>,
    labels: &[(String, String)],
) -> Vec<(String, String)> {
    let service_label = labels.iter().find(|(k, _)| k == "service_name");
    let mut out = Vec::with_capacity(labels.len() + 2);
    match (service_label, app) {
        (Some((_, s)), Some(app)) => {
            out.push(("service.name".to_string(), s.clone()));
            if !labels.iter().any(|(k, _)| k == "app_name") {
                out.push(("app_name".to_string(), app.to_string()));
            }
        }
        (Some((_, s)), None) => out.push(("service.name".to_string(), s.clone())),
        (None, Some(app)) => out.push(("service.name".to_string(), app.to_string())),
        (None, None) => {}
    }
    out.extend(labels.iter().filter(|(k, _)| k != "service_name").cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_parse_as_pyroscope_writes_them() {
        let n = AppName::parse("my.app.cpu{env=prod, region = eu ,}").unwrap();
        assert_eq!(n.app, "my.app");
        assert_eq!(n.profile_type, Some("cpu"));
        assert_eq!(n.sample_type(), Some(("samples", "count")));
        assert_eq!(n.labels, pairs(&[("env", "prod"), ("region", "eu")]));
        let n = AppName::parse("svc.alloc_space").unwrap();
        assert_eq!(
            (n.app.as_str(), n.sample_type()),
            ("svc", Some(("alloc_space", "bytes")))
        );
        let n = AppName::parse("my.app").unwrap();
        assert_eq!((n.app.as_str(), n.profile_type), ("my.app", None));
        let n = AppName::parse("x{a=1,a=2}").unwrap();
        assert_eq!(n.labels, pairs(&[("a", "2")]));
        for bad in ["", "{a=b}", "app{a=b", "app{ab}", "app{=b}"] {
            assert!(AppName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn service_name_comes_from_the_label_or_the_app() {
        let attrs = resource_attributes(Some("app"), &pairs(&[("env", "prod")]));
        assert_eq!(attrs, pairs(&[("service.name", "app"), ("env", "prod")]));
        let attrs = resource_attributes(
            Some("app"),
            &pairs(&[("service_name", "svc"), ("env", "x")]),
        );
        assert_eq!(
            attrs,
            pairs(&[("service.name", "svc"), ("app_name", "app"), ("env", "x")])
        );
        let attrs = resource_attributes(None, &pairs(&[("__name__", "process_cpu")]));
        assert_eq!(attrs, pairs(&[("__name__", "process_cpu")]));
    }
}
