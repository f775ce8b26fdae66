//! Reads an expanded configuration tree into typed structs, using a wholly-referenced
//! scalar's typed value where the field wants a number, boolean or option, and its text where
//! the field wants a string: `max_recv_msg_size_mib: ${env:N}` is the number 64 and
//! `bearer_token: ${env:T}` the string `"007"`, as the Collector's confmap decodes them.

use super::expand::EXPANDED_TAG;
use serde::de::DeserializeOwned;
use serde_path_to_error::{Error, Path, Segment};
use serde_yaml_ng::Value;

/// How many fields one read may turn back into text (bounds the retries).
const MAX_REVERTS: usize = 256;

/// Deserializes `tree` (see the module docs); the error carries the path of the offending key.
pub fn deserialize<T: DeserializeOwned>(tree: &Value) -> Result<T, Error<serde_yaml_ng::Error>> {
    let mut work = typed_copy(tree);
    let mut reverts = 0;
    loop {
        match serde_path_to_error::deserialize::<_, T>(work.clone()) {
            Ok(v) => return Ok(v),
            Err(e) => {
                let wrong_type = e.inner().to_string().starts_with("invalid type");
                if wrong_type
                    && reverts < MAX_REVERTS
                    && let Some(text) = expanded_text_at(tree, e.path())
                    && let Some(slot) = node_at_mut(&mut work, e.path())
                    && *slot != Value::String(text.to_owned())
                {
                    *slot = Value::String(text.to_owned());
                    reverts += 1;
                    continue;
                }
                return Err(e);
            }
        }
    }
}

/// `tree` with every expanded scalar replaced by its YAML-typed value.
pub fn typed_copy(tree: &Value) -> Value {
    match tree {
        Value::Tagged(t) if t.tag == EXPANDED_TAG => match &t.value {
            Value::String(text) => {
                serde_yaml_ng::from_str(text).unwrap_or_else(|_| t.value.clone())
            }
            other => other.clone(),
        },
        Value::Tagged(t) => {
            let mut t = t.clone();
            t.value = typed_copy(&t.value);
            Value::Tagged(t)
        }
        Value::Sequence(items) => Value::Sequence(items.iter().map(typed_copy).collect()),
        Value::Mapping(map) => Value::Mapping(
            map.iter()
                .map(|(k, v)| (k.clone(), typed_copy(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn expanded_text_at<'a>(tree: &'a Value, path: &Path) -> Option<&'a str> {
    let mut node = tree;
    for segment in path {
        node = child(node, segment)?;
    }
    match node {
        Value::Tagged(t) if t.tag == EXPANDED_TAG => t.value.as_str(),
        _ => None,
    }
}

fn child<'a>(node: &'a Value, segment: &Segment) -> Option<&'a Value> {
    match (node, segment) {
        (Value::Sequence(items), Segment::Seq { index }) => items.get(*index),
        (Value::Mapping(map), Segment::Map { key }) => map
            .iter()
            .find(|(k, _)| key_text(k).as_deref() == Some(key.as_str()))
            .map(|(_, v)| v),
        _ => None,
    }
}

fn node_at_mut<'a>(tree: &'a mut Value, path: &Path) -> Option<&'a mut Value> {
    let mut node = tree;
    for segment in path {
        node = match (node, segment) {
            (Value::Sequence(items), Segment::Seq { index }) => items.get_mut(*index)?,
            (Value::Mapping(map), Segment::Map { key }) => map
                .iter_mut()
                .find(|(k, _)| key_text(k).as_deref() == Some(key.as_str()))
                .map(|(_, v)| v)?,
            _ => return None,
        };
    }
    Some(node)
}

fn key_text(key: &Value) -> Option<String> {
    match key {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_yaml_ng::value::{Tag, TaggedValue};

    fn expanded(text: &str) -> Value {
        Value::Tagged(Box::new(TaggedValue {
            tag: Tag::new(EXPANDED_TAG),
            value: Value::String(text.into()),
        }))
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Section {
        size_mib: u64,
        token: String,
        enabled: Option<bool>,
        names: Vec<String>,
    }

    fn tree(size: Value, token: Value, names: Value) -> Value {
        let mut map = serde_yaml_ng::Mapping::new();
        map.insert("size_mib".into(), size);
        map.insert("token".into(), token);
        map.insert("enabled".into(), expanded("true"));
        map.insert("names".into(), names);
        Value::Mapping(map)
    }

    #[test]
    fn typed_where_wanted_text_where_a_string_is_wanted() {
        let names = Value::Sequence(vec![expanded("1"), "b".into()]);
        let s: Section = deserialize(&tree(expanded("64"), expanded("007"), names)).unwrap();
        assert_eq!(
            s,
            Section {
                size_mib: 64,
                token: "007".into(),
                enabled: Some(true),
                names: vec!["1".into(), "b".into()],
            }
        );
    }

    #[test]
    fn real_type_errors_still_name_the_key() {
        let names = Value::Sequence(vec![]);
        let e = deserialize::<Section>(&tree(expanded("yes please"), "t".into(), names.clone()))
            .unwrap_err();
        assert_eq!(e.path().to_string(), "size_mib");
        // A literal (not expanded) string in a number field is not retried.
        let e = deserialize::<Section>(&tree("64".into(), "t".into(), names)).unwrap_err();
        assert_eq!(e.path().to_string(), "size_mib");
        assert!(e.inner().to_string().starts_with("invalid type: string"));
    }
}
