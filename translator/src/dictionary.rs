//! Bounds-checked resolution of the OTLP profiles dictionary.
//!
//! Every index from the wire goes through here. Index 0 is read as the Collector's pdata reads
//! it: `table[0]` as it is. When `table[0]` is absent or the zero value (`""`, `Location{}`,
//! `Link` with empty or all-zero ids, `KeyValueAndUnit` with no key, no unit and an absent or
//! empty value, …) index 0 means "unset"; when a producer put a real entry there (async-profiler
//! before proto 1.10 wrote its first location, function, thread name and even the sample type's
//! string at index 0), that entry is used (`profilink validate` warns about it). An index outside
//! its table is a [`TranslateError::IndexOutOfRange`] naming the table, never a panic.
//! Attribute keys and string values resolve in both forms: inline (`key`, `string_value`) and
//! reference-based (`key_strindex`, `string_value_strindex`), recursively inside arrays and
//! key-value lists.

use crate::error::{Limit, TranslateError};
use profilink_proto::otlp::{
    AnyValue, Function, KeyValue, KeyValueAndUnit, Link, Location, Mapping, ProfilesDictionary,
    Stack, any_value,
};

/// Nesting depth beyond which array/kvlist values are cut off (prost already bounds decoding
/// recursion; this keeps hand-built inputs bounded too).
const MAX_VALUE_DEPTH: usize = 32;

/// A resolved attribute value, borrowing from the request.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue<'a> {
    /// No value (an empty `AnyValue`).
    Empty,
    /// A string.
    Str(&'a str),
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A double.
    Double(f64),
    /// Bytes.
    Bytes(&'a [u8]),
    /// An array.
    Array(Vec<AttrValue<'a>>),
    /// A key-value list.
    KvList(Vec<(&'a str, AttrValue<'a>)>),
}

impl<'a> AttrValue<'a> {
    /// The value as a string when it is one.
    pub fn as_str(&self) -> Option<&'a str> {
        match self {
            AttrValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an integer: ints as they are, decimal strings parsed.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            AttrValue::Int(v) => Some(*v),
            AttrValue::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// The value rendered as text (strings unquoted, numbers in decimal); `None` for empty,
    /// bytes and composite values.
    pub fn to_text(&self) -> Option<String> {
        match self {
            AttrValue::Str(s) => Some((*s).to_owned()),
            AttrValue::Int(v) => Some(v.to_string()),
            AttrValue::Bool(v) => Some(v.to_string()),
            AttrValue::Double(v) => Some(v.to_string()),
            _ => None,
        }
    }
}

/// A resolved `(key, value)` attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct Attr<'a> {
    /// The key.
    pub key: &'a str,
    /// The value.
    pub value: AttrValue<'a>,
}

/// Read access to a request's dictionary with bounds checks.
#[derive(Debug, Clone, Copy)]
pub struct Dictionary<'a> {
    dict: Option<&'a ProfilesDictionary>,
}

/// Whether a table entry is its message's zero value (index 0 then means "unset").
pub(crate) trait ZeroValue {
    fn is_zero_value(&self) -> bool;
}

impl ZeroValue for String {
    fn is_zero_value(&self) -> bool {
        self.is_empty()
    }
}

impl ZeroValue for Link {
    fn is_zero_value(&self) -> bool {
        self.trace_id.iter().all(|b| *b == 0) && self.span_id.iter().all(|b| *b == 0)
    }
}

impl ZeroValue for KeyValueAndUnit {
    fn is_zero_value(&self) -> bool {
        self.key_strindex == 0
            && self.unit_strindex == 0
            && self.value.as_ref().is_none_or(|v| v.value.is_none())
    }
}

macro_rules! zero_by_default {
    ($($t:ty),*) => {$(
        impl ZeroValue for $t {
            fn is_zero_value(&self) -> bool {
                *self == <$t>::default()
            }
        }
    )*};
}

zero_by_default!(Function, Location, Mapping, Stack);

fn get<'a, T: ZeroValue>(
    table: &'a [T],
    name: &'static str,
    index: i32,
) -> Result<Option<&'a T>, TranslateError> {
    if index == 0 {
        return Ok(table.first().filter(|t| !t.is_zero_value()));
    }
    usize::try_from(index)
        .ok()
        .and_then(|i| table.get(i))
        .map(Some)
        .ok_or(TranslateError::IndexOutOfRange {
            table: name,
            index: i64::from(index),
            len: table.len(),
        })
}

impl<'a> Dictionary<'a> {
    /// Wraps a request's dictionary (absent means every table is empty).
    pub fn new(dict: Option<&'a ProfilesDictionary>) -> Self {
        Dictionary { dict }
    }

    /// The raw dictionary, when present.
    pub fn raw(&self) -> Option<&'a ProfilesDictionary> {
        self.dict
    }

    fn tables(&self) -> &'a ProfilesDictionary {
        static EMPTY: ProfilesDictionary = ProfilesDictionary {
            mapping_table: Vec::new(),
            location_table: Vec::new(),
            function_table: Vec::new(),
            link_table: Vec::new(),
            string_table: Vec::new(),
            attribute_table: Vec::new(),
            stack_table: Vec::new(),
        };
        self.dict.unwrap_or(&EMPTY)
    }

    /// `string_table[index]`; index 0 is `string_table[0]`, or `""` without one.
    pub fn string(&self, index: i32) -> Result<&'a str, TranslateError> {
        Ok(get(&self.tables().string_table, "string_table", index)?.map_or("", String::as_str))
    }

    /// `function_table[index]`; `None` for 0 when `function_table[0]` is absent or the zero value.
    pub fn function(&self, index: i32) -> Result<Option<&'a Function>, TranslateError> {
        get(&self.tables().function_table, "function_table", index)
    }

    /// `location_table[index]`; `None` for 0 when `location_table[0]` is absent or the zero value.
    pub fn location(&self, index: i32) -> Result<Option<&'a Location>, TranslateError> {
        get(&self.tables().location_table, "location_table", index)
    }

    /// `mapping_table[index]`; `None` for 0 when `mapping_table[0]` is absent or the zero value.
    pub fn mapping(&self, index: i32) -> Result<Option<&'a Mapping>, TranslateError> {
        get(&self.tables().mapping_table, "mapping_table", index)
    }

    /// `stack_table[index]`; `None` for 0 (the empty stack) unless `stack_table[0]` has
    /// locations.
    pub fn stack(&self, index: i32) -> Result<Option<&'a Stack>, TranslateError> {
        get(&self.tables().stack_table, "stack_table", index)
    }

    /// `link_table[index]`; `None` for 0 when `link_table[0]` is absent or the zero value.
    pub fn link(&self, index: i32) -> Result<Option<&'a Link>, TranslateError> {
        get(&self.tables().link_table, "link_table", index)
    }

    /// `attribute_table[index]` resolved; `None` for 0 when `attribute_table[0]` is absent or
    /// the zero value.
    pub fn attribute(&self, index: i32) -> Result<Option<Attr<'a>>, TranslateError> {
        match get(&self.tables().attribute_table, "attribute_table", index)? {
            None => Ok(None),
            Some(kvu) => self.key_value_and_unit(kvu).map(Some),
        }
    }

    /// Resolves a dictionary attribute entry.
    pub fn key_value_and_unit(&self, kvu: &'a KeyValueAndUnit) -> Result<Attr<'a>, TranslateError> {
        Ok(Attr {
            key: self.string(kvu.key_strindex)?,
            value: match &kvu.value {
                Some(v) => self.any_value(v)?,
                None => AttrValue::Empty,
            },
        })
    }

    /// Resolves the attributes at `indices`, skipping index 0 when it is the zero value.
    pub fn attributes(&self, indices: &'a [i32]) -> Result<Vec<Attr<'a>>, TranslateError> {
        let mut out = Vec::with_capacity(indices.len());
        for &i in indices {
            if let Some(a) = self.attribute(i)? {
                out.push(a);
            }
        }
        Ok(out)
    }

    /// Resolves an inline `KeyValue` (resource, scope attributes): `key` or `key_strindex`.
    pub fn key_value(&self, kv: &'a KeyValue) -> Result<Attr<'a>, TranslateError> {
        let key = if kv.key.is_empty() && kv.key_strindex != 0 {
            self.string(kv.key_strindex)?
        } else {
            kv.key.as_str()
        };
        Ok(Attr {
            key,
            value: match &kv.value {
                Some(v) => self.any_value(v)?,
                None => AttrValue::Empty,
            },
        })
    }

    /// Resolves inline `KeyValue`s.
    pub fn key_values(&self, kvs: &'a [KeyValue]) -> Result<Vec<Attr<'a>>, TranslateError> {
        kvs.iter().map(|kv| self.key_value(kv)).collect()
    }

    /// Resolves an `AnyValue`, including `string_value_strindex`, recursively.
    pub fn any_value(&self, v: &'a AnyValue) -> Result<AttrValue<'a>, TranslateError> {
        self.any_value_at(v, 0)
    }

    fn any_value_at(&self, v: &'a AnyValue, depth: usize) -> Result<AttrValue<'a>, TranslateError> {
        use any_value::Value as V;
        if depth > MAX_VALUE_DEPTH {
            return Err(Limit::ValueDepth {
                max: MAX_VALUE_DEPTH,
            }
            .into());
        }
        Ok(match &v.value {
            None => AttrValue::Empty,
            Some(V::StringValue(s)) => AttrValue::Str(s),
            Some(V::StringValueStrindex(i)) => AttrValue::Str(self.string(*i)?),
            Some(V::BoolValue(b)) => AttrValue::Bool(*b),
            Some(V::IntValue(i)) => AttrValue::Int(*i),
            Some(V::DoubleValue(d)) => AttrValue::Double(*d),
            Some(V::BytesValue(b)) => AttrValue::Bytes(b),
            Some(V::ArrayValue(a)) => AttrValue::Array(
                a.values
                    .iter()
                    .map(|x| self.any_value_at(x, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            Some(V::KvlistValue(l)) => {
                let mut out = Vec::with_capacity(l.values.len());
                for kv in &l.values {
                    let key = if kv.key.is_empty() && kv.key_strindex != 0 {
                        self.string(kv.key_strindex)?
                    } else {
                        kv.key.as_str()
                    };
                    let value = match &kv.value {
                        Some(x) => self.any_value_at(x, depth + 1)?,
                        None => AttrValue::Empty,
                    };
                    out.push((key, value));
                }
                AttrValue::KvList(out)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::otlp::{ArrayValue, KeyValueList, Location, Stack};

    fn dict() -> ProfilesDictionary {
        ProfilesDictionary {
            string_table: vec!["".into(), "thread.name".into(), "main".into()],
            attribute_table: vec![
                KeyValueAndUnit::default(),
                KeyValueAndUnit {
                    key_strindex: 1,
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValueStrindex(2)),
                    }),
                    unit_strindex: 0,
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn resolves_reference_based_attributes() {
        let d = dict();
        let dict = Dictionary::new(Some(&d));
        let a = dict.attribute(1).unwrap().unwrap();
        assert_eq!(a.key, "thread.name");
        assert_eq!(a.value, AttrValue::Str("main"));
        assert_eq!(dict.attribute(0).unwrap(), None);
    }

    #[test]
    fn real_entries_at_index_0_are_used_as_they_are() {
        // async-profiler before proto 1.10: string 0 is the engine, location 0 a real frame.
        let d = ProfilesDictionary {
            string_table: vec!["itimer".into(), "count".into()],
            location_table: vec![Location {
                address: 7,
                ..Default::default()
            }],
            link_table: vec![Link {
                trace_id: vec![0; 16],
                span_id: vec![0; 8],
            }],
            attribute_table: vec![KeyValueAndUnit {
                value: Some(AnyValue { value: None }),
                ..Default::default()
            }],
            stack_table: vec![Stack::default()],
            ..Default::default()
        };
        let dict = Dictionary::new(Some(&d));
        assert_eq!(dict.string(0), Ok("itimer"));
        assert_eq!(dict.location(0).unwrap().map(|l| l.address), Some(7));
        // Zero values (pdata's forms included) are "unset".
        assert_eq!(dict.link(0), Ok(None));
        assert_eq!(dict.attribute(0), Ok(None));
        assert_eq!(dict.stack(0), Ok(None));
        assert_eq!(dict.function(0), Ok(None));
    }

    #[test]
    fn out_of_range_names_the_table() {
        let d = dict();
        let dict = Dictionary::new(Some(&d));
        assert_eq!(
            dict.string(7),
            Err(TranslateError::IndexOutOfRange {
                table: "string_table",
                index: 7,
                len: 3
            })
        );
        assert!(matches!(
            dict.location(-1),
            Err(TranslateError::IndexOutOfRange {
                table: "location_table",
                index: -1,
                ..
            })
        ));
        assert!(Dictionary::new(None).stack(1).is_err());
        assert_eq!(Dictionary::new(None).string(0), Ok(""));
    }

    #[test]
    fn nested_values_resolve_strindex() {
        let d = dict();
        let dict = Dictionary::new(Some(&d));
        let v = AnyValue {
            value: Some(any_value::Value::KvlistValue(KeyValueList {
                values: vec![KeyValue {
                    key: String::new(),
                    key_strindex: 1,
                    value: Some(AnyValue {
                        value: Some(any_value::Value::ArrayValue(ArrayValue {
                            values: vec![AnyValue {
                                value: Some(any_value::Value::StringValueStrindex(2)),
                            }],
                        })),
                    }),
                }],
            })),
        };
        assert_eq!(
            dict.any_value(&v).unwrap(),
            AttrValue::KvList(vec![(
                "thread.name",
                AttrValue::Array(vec![AttrValue::Str("main")])
            )])
        );
        let bad = AnyValue {
            value: Some(any_value::Value::StringValueStrindex(9)),
        };
        assert!(dict.any_value(&bad).is_err());
    }
}
