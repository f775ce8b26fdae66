//! The password type of `auth.sasl` and `auth.plain_text`: [`Secret`], never shown (`Debug`
//! prints `<redacted>`) nor repeated in the error that refuses a value of the wrong type.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::fmt;

/// A secret setting (a SASL password): `Debug` shows `<redacted>`; a value that is not a
/// string is refused without being repeated in the error.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret holding `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the client that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when empty (not set).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "<empty>"
        } else {
            "<redacted>"
        })
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SecretVisitor;
        // serde's default messages quote the value they refused (`invalid type: integer
        // `1234`…`): every non-string is refused here with one that does not. It still starts
        // with `invalid type`, which the service's config reader takes as its cue to read a
        // `${env:…}` value as text.
        fn refuse<E: de::Error>(kind: &'static str) -> E {
            E::invalid_type(de::Unexpected::Other(kind), &"a string (not shown here)")
        }
        impl<'de> Visitor<'de> for SecretVisitor {
            type Value = Secret;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Secret, E> {
                Ok(Secret(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Secret, E> {
                Ok(Secret(v))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Secret, E> {
                Err(refuse("boolean"))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Secret, E> {
                Err(refuse("number"))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Secret, E> {
                Err(refuse("number"))
            }
            fn visit_i128<E: de::Error>(self, _: i128) -> Result<Secret, E> {
                Err(refuse("number"))
            }
            fn visit_u128<E: de::Error>(self, _: u128) -> Result<Secret, E> {
                Err(refuse("number"))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Secret, E> {
                Err(refuse("number"))
            }
            fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Secret, E> {
                Err(refuse("bytes"))
            }
            fn visit_none<E: de::Error>(self) -> Result<Secret, E> {
                Ok(Secret::default())
            }
            fn visit_unit<E: de::Error>(self) -> Result<Secret, E> {
                Ok(Secret::default())
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Secret, A::Error> {
                Err(refuse("sequence"))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<Secret, A::Error> {
                Err(refuse("map"))
            }
        }
        d.deserialize_any(SecretVisitor)
    }
}
