//! Profiler sessions: which process a sample belongs to, and its `profiler_id`.
//!
//! # Identity
//!
//! A Sentry profiler session is one profiled process. Its identity is the set of the
//! [`IDENTITY_KEYS`] attributes found on the resource and, for producers that put process
//! attributes on samples (eBPF profiler versions before 2026-03 put `process.*` there), on the
//! sample; a sample attribute overrides a resource attribute with the same key. Values are
//! rendered as text (strings as they are, integers in decimal, so `process.pid` as int `42` and
//! as string `"42"` are the same); empty strings count as absent. When neither layer has any
//! identity key, every scalar resource attribute is used instead, so unrelated anonymous
//! resources do not merge.
//!
//! # `profiler_id`
//!
//! * If the resource, the profile or the sample carries `sentry.profiler_id` holding a UUID (32
//!   hex digits, dashes and case ignored), that id, normalized to 32 lowercase hex, is used as
//!   it is (the sample's wins over the profile's, the profile's over the resource's; the
//!   collector adds a profile's id to the resource layer).
//! * Otherwise `profiler_id` = SHA-256 over the tag `profilink/profiler_id/v1\0` followed by each
//!   identity `(key, value)` in ascending key order, each as a u32 big-endian byte length and
//!   the UTF-8 bytes; the first 16 bytes with UUID version nibble 4 and the RFC 4122 variant,
//!   as 32 lowercase hex characters.
//!
//! The derivation is a pure function of the identity, so a retry, a second collector replica or
//! a traces pipeline (which can build the same [`ProcessIdentity`] from its resource) compute
//! the same id. `process.creation.time` is part of the key so that a restarted process with a
//! reused pid gets a new session when the producer reports it.

use super::ids::{first16, uuid_v4_hex};
use crate::dictionary::{Attr, AttrValue, Dictionary};
use profilink_proto::otlp::{ProfilesDictionary, ResourceProfiles};
use profilink_proto::sentry::{hex_lower, parse_sentry_id};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Attribute keys that identify a profiled process, in ascending order.
pub const IDENTITY_KEYS: &[&str] = &[
    "container.id",
    "host.id",
    "host.name",
    "k8s.pod.uid",
    "process.creation.time",
    "process.executable.name",
    "process.executable.path",
    "process.pid",
    "service.instance.id",
    "service.name",
];

/// Attribute carrying an explicit Sentry profiler id.
pub const PROFILER_ID_KEY: &str = "sentry.profiler_id";

/// The identity of a profiled process (see the module docs of [`super`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ProcessIdentity {
    attributes: BTreeMap<String, String>,
    profiler_id: Option<String>,
}

fn scalar_text(v: &AttrValue<'_>) -> Option<String> {
    v.to_text().filter(|s| !s.is_empty())
}

impl ProcessIdentity {
    /// Builds the identity from resolved resource attributes and sample attributes (the sample
    /// layer overrides the resource layer key by key).
    pub fn from_attributes(resource: &[Attr<'_>], sample: &[Attr<'_>]) -> Self {
        // The rules of `from_text_layers`, rendering only the attributes that take part.
        let mut attributes = BTreeMap::new();
        let mut profiler_id = None;
        for layer in [resource, sample] {
            for a in layer {
                if a.key == PROFILER_ID_KEY {
                    if let Some(bytes) = scalar_text(&a.value).and_then(|v| parse_sentry_id(&v)) {
                        profiler_id = Some(hex_lower(&bytes));
                    }
                } else if IDENTITY_KEYS.contains(&a.key)
                    && let Some(v) = scalar_text(&a.value)
                {
                    attributes.insert(a.key.to_owned(), v);
                }
            }
        }
        if attributes.is_empty() {
            for a in resource {
                if a.key != PROFILER_ID_KEY
                    && let Some(v) = scalar_text(&a.value)
                {
                    attributes.insert(a.key.to_owned(), v);
                }
            }
        }
        ProcessIdentity {
            attributes,
            profiler_id,
        }
    }

    /// Whether an attribute with this key can change a sample's identity.
    pub(crate) fn is_identity_key(key: &str) -> bool {
        key == PROFILER_ID_KEY || IDENTITY_KEYS.contains(&key)
    }

    /// Builds the identity from plain `(key, value)` text pairs, with the same rules as
    /// [`ProcessIdentity::from_attributes`] (for pipelines that hold attributes as strings).
    pub fn from_text_layers(resource: &[(String, String)], sample: &[(String, String)]) -> Self {
        let mut attributes = BTreeMap::new();
        let mut profiler_id = None;
        for layer in [resource, sample] {
            for (k, v) in layer {
                if v.is_empty() {
                    continue;
                }
                if k == PROFILER_ID_KEY {
                    if let Some(bytes) = parse_sentry_id(v) {
                        profiler_id = Some(hex_lower(&bytes));
                    }
                } else if IDENTITY_KEYS.contains(&k.as_str()) {
                    attributes.insert(k.clone(), v.clone());
                }
            }
        }
        if attributes.is_empty() {
            for (k, v) in resource {
                if !v.is_empty() && k != PROFILER_ID_KEY {
                    attributes.insert(k.clone(), v.clone());
                }
            }
        }
        ProcessIdentity {
            attributes,
            profiler_id,
        }
    }

    /// The identity attributes, sorted by key.
    pub fn attributes(&self) -> &BTreeMap<String, String> {
        &self.attributes
    }

    /// The explicit `sentry.profiler_id`, normalized, when one was given.
    pub fn explicit_profiler_id(&self) -> Option<&str> {
        self.profiler_id.as_deref()
    }

    /// One identity attribute.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// The `profiler_id` of a process (see the module docs of [`super`]): the explicit
/// `sentry.profiler_id` when present, else a hash of the identity attributes.
pub fn derive_profiler_id(identity: &ProcessIdentity) -> String {
    if let Some(id) = &identity.profiler_id {
        return id.clone();
    }
    let mut h = Sha256::new();
    h.update(b"profilink/profiler_id/v1\0");
    for (k, v) in &identity.attributes {
        // Attribute strings come from a protobuf message, so they are far below 4 GiB.
        h.update((k.len() as u32).to_be_bytes());
        h.update(k.as_bytes());
        h.update((v.len() as u32).to_be_bytes());
        h.update(v.as_bytes());
    }
    uuid_v4_hex(first16(&h.finalize()))
}

/// The profiler id of a `ResourceProfiles` from its resource's attributes alone (what a
/// sampler or a Kafka exporter keys a profiler session by, without translating its samples).
/// Attributes that cannot be read count as absent.
pub fn resource_profiler_id(
    dictionary: Option<&ProfilesDictionary>,
    resource_profiles: &ResourceProfiles,
) -> String {
    let dict = Dictionary::new(dictionary);
    let attrs = resource_profiles
        .resource
        .as_ref()
        .and_then(|r| dict.key_values(&r.attributes).ok())
        .unwrap_or_default();
    derive_profiler_id(&ProcessIdentity::from_attributes(&attrs, &[]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::sentry::is_sentry_id;

    fn attr<'a>(key: &'a str, value: AttrValue<'a>) -> Attr<'a> {
        Attr { key, value }
    }

    #[test]
    fn int_and_string_pid_are_the_same_identity() {
        let a = ProcessIdentity::from_attributes(&[attr("process.pid", AttrValue::Int(42))], &[]);
        let b = ProcessIdentity::from_attributes(&[], &[attr("process.pid", AttrValue::Str("42"))]);
        assert_eq!(a, b);
        let id = derive_profiler_id(&a);
        assert!(is_sentry_id(&id));
        assert_eq!(id, derive_profiler_id(&b));
    }

    #[test]
    fn sample_layer_overrides_and_splits() {
        let res = [attr("container.id", AttrValue::Str("c1"))];
        let p1 = ProcessIdentity::from_attributes(&res, &[attr("process.pid", AttrValue::Int(1))]);
        let p2 = ProcessIdentity::from_attributes(&res, &[attr("process.pid", AttrValue::Int(2))]);
        assert_ne!(derive_profiler_id(&p1), derive_profiler_id(&p2));
        assert_eq!(p1.get("container.id"), Some("c1"));
        // Thread attributes are not identity.
        let p3 = ProcessIdentity::from_attributes(
            &res,
            &[
                attr("process.pid", AttrValue::Int(1)),
                attr("thread.id", AttrValue::Int(7)),
            ],
        );
        assert_eq!(p1, p3);
    }

    #[test]
    fn explicit_profiler_id_wins_and_is_normalized() {
        let p = ProcessIdentity::from_attributes(
            &[
                attr("process.pid", AttrValue::Int(1)),
                attr(
                    PROFILER_ID_KEY,
                    AttrValue::Str("7FFB3319-B3FF-432E-BF7A-635F28B29A80"),
                ),
            ],
            &[],
        );
        assert_eq!(derive_profiler_id(&p), "7ffb3319b3ff432ebf7a635f28b29a80");
        // Not a UUID: ignored.
        let q =
            ProcessIdentity::from_attributes(&[attr(PROFILER_ID_KEY, AttrValue::Str("xyz"))], &[]);
        assert_eq!(q.explicit_profiler_id(), None);
    }

    #[test]
    fn fallback_uses_all_resource_attributes() {
        let a = ProcessIdentity::from_attributes(&[attr("custom", AttrValue::Str("a"))], &[]);
        let b = ProcessIdentity::from_attributes(&[attr("custom", AttrValue::Str("b"))], &[]);
        assert_ne!(derive_profiler_id(&a), derive_profiler_id(&b));
        // Empty values are absent.
        let c = ProcessIdentity::from_attributes(&[attr("container.id", AttrValue::Str(""))], &[]);
        assert_eq!(c, ProcessIdentity::default());
    }

    #[test]
    fn known_vector() {
        // Pinned so that other pipelines can check their implementation against it.
        let p = ProcessIdentity::from_text_layers(
            &[
                ("process.pid".into(), "1234".into()),
                ("host.name".into(), "h".into()),
            ],
            &[],
        );
        let id = derive_profiler_id(&p);
        let mut h = Sha256::new();
        h.update(b"profilink/profiler_id/v1\0");
        for (k, v) in [("host.name", "h"), ("process.pid", "1234")] {
            h.update((k.len() as u32).to_be_bytes());
            h.update(k);
            h.update((v.len() as u32).to_be_bytes());
            h.update(v);
        }
        assert_eq!(id, uuid_v4_hex(first16(&h.finalize())));
    }
}
