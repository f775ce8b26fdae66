//! A deduplicating builder for the request-wide OTLP `ProfilesDictionary`.
//!
//! * Every table starts with its zero entry: `string_table[0] = ""`, `Mapping{}`, `Location{}`,
//!   `Function{}`, `Link{}` (empty ids), `Stack{}`, and `KeyValueAndUnit{}` with `value: None`.
//! * Each table has a hash map from content to index, so equal content gets one index. Interning
//!   the zero value of a table returns 0 ("unset").
//! * Attribute keys go to the string table (`key_strindex`, as 1.10 requires for dictionary
//!   attributes); attribute values stay inline (`string_value`, not `string_value_strindex`) for
//!   the widest compatibility.
//! * Nothing is interned speculatively: callers intern only what they reference, so the result
//!   has no orphaned entries.

use crate::fx_hash::FxHashMap;
use profilink_proto::otlp::{
    AnyValue, ArrayValue, Function, KeyValue, KeyValueAndUnit, KeyValueList, Line, Link, Location,
    Mapping, ProfilesDictionary, Stack, any_value,
};

/// A hashable mirror of `AnyValue` (doubles compared by bit pattern).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ValueKey {
    None,
    Str(String),
    StrIdx(i32),
    Bool(bool),
    Int(i64),
    Double(u64),
    Bytes(Vec<u8>),
    Array(Vec<ValueKey>),
    KvList(Vec<(String, i32, ValueKey)>),
}

impl ValueKey {
    fn of(v: Option<&AnyValue>) -> ValueKey {
        use any_value::Value as V;
        match v.and_then(|v| v.value.as_ref()) {
            None => ValueKey::None,
            Some(V::StringValue(s)) => ValueKey::Str(s.clone()),
            Some(V::StringValueStrindex(i)) => ValueKey::StrIdx(*i),
            Some(V::BoolValue(b)) => ValueKey::Bool(*b),
            Some(V::IntValue(i)) => ValueKey::Int(*i),
            Some(V::DoubleValue(d)) => ValueKey::Double(d.to_bits()),
            Some(V::BytesValue(b)) => ValueKey::Bytes(b.clone()),
            Some(V::ArrayValue(a)) => {
                ValueKey::Array(a.values.iter().map(|x| ValueKey::of(Some(x))).collect())
            }
            Some(V::KvlistValue(l)) => ValueKey::KvList(
                l.values
                    .iter()
                    .map(|kv| {
                        (
                            kv.key.clone(),
                            kv.key_strindex,
                            ValueKey::of(kv.value.as_ref()),
                        )
                    })
                    .collect(),
            ),
        }
    }
}

/// Builds one deduplicated `ProfilesDictionary` for a whole request.
#[derive(Default)]
pub struct DictionaryBuilder {
    strings: Vec<String>,
    string_ix: FxHashMap<String, i32>,
    functions: Vec<Function>,
    function_ix: FxHashMap<Function, i32>,
    mappings: Vec<Mapping>,
    mapping_ix: FxHashMap<Mapping, i32>,
    locations: Vec<Location>,
    location_ix: FxHashMap<(i32, u64, Vec<Line>, Vec<i32>), i32>,
    stacks: Vec<Stack>,
    stack_ix: FxHashMap<Vec<i32>, i32>,
    links: Vec<Link>,
    link_ix: FxHashMap<([u8; 16], [u8; 8]), i32>,
    attributes: Vec<KeyValueAndUnit>,
    attribute_ix: FxHashMap<(i32, ValueKey, i32), i32>,
}

fn index(len: usize) -> i32 {
    // Tables beyond i32::MAX entries cannot be addressed by the protocol; saturating keeps
    // this panic-free (prost would refuse such a message long before).
    i32::try_from(len).unwrap_or(i32::MAX)
}

impl DictionaryBuilder {
    /// A builder holding only the zero entries.
    pub fn new() -> Self {
        let mut b = DictionaryBuilder::default();
        b.strings.push(String::new());
        b.string_ix.insert(String::new(), 0);
        b.functions.push(Function::default());
        b.function_ix.insert(Function::default(), 0);
        b.mappings.push(Mapping::default());
        b.mapping_ix.insert(Mapping::default(), 0);
        b.locations.push(Location::default());
        b.location_ix.insert((0, 0, Vec::new(), Vec::new()), 0);
        b.stacks.push(Stack::default());
        b.stack_ix.insert(Vec::new(), 0);
        b.links.push(Link::default());
        b.attributes.push(KeyValueAndUnit::default());
        b.attribute_ix.insert((0, ValueKey::None, 0), 0);
        b
    }

    /// Index of `s` in the string table.
    pub fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.string_ix.get(s) {
            return i;
        }
        let i = index(self.strings.len());
        self.strings.push(s.to_owned());
        self.string_ix.insert(s.to_owned(), i);
        i
    }

    /// Index of `f` in the function table.
    pub fn function(&mut self, f: Function) -> i32 {
        if let Some(&i) = self.function_ix.get(&f) {
            return i;
        }
        let i = index(self.functions.len());
        self.functions.push(f);
        self.function_ix.insert(f, i);
        i
    }

    /// Index of `m` in the mapping table.
    pub fn mapping(&mut self, m: Mapping) -> i32 {
        if let Some(&i) = self.mapping_ix.get(&m) {
            return i;
        }
        let i = index(self.mappings.len());
        self.mappings.push(m.clone());
        self.mapping_ix.insert(m, i);
        i
    }

    /// Index of `l` in the location table.
    pub fn location(&mut self, l: Location) -> i32 {
        let key = (l.mapping_index, l.address, l.lines, l.attribute_indices);
        if let Some(&i) = self.location_ix.get(&key) {
            return i;
        }
        let i = index(self.locations.len());
        self.locations.push(Location {
            mapping_index: key.0,
            address: key.1,
            lines: key.2.clone(),
            attribute_indices: key.3.clone(),
        });
        self.location_ix.insert(key, i);
        i
    }

    /// Index of the stack of `location_indices` (leaf first); 0 for the empty stack.
    pub fn stack(&mut self, location_indices: Vec<i32>) -> i32 {
        if let Some(&i) = self.stack_ix.get(&location_indices) {
            return i;
        }
        let i = index(self.stacks.len());
        self.stacks.push(Stack {
            location_indices: location_indices.clone(),
        });
        self.stack_ix.insert(location_indices, i);
        i
    }

    /// Index of the link to `span_id` in `trace_id`.
    pub fn link(&mut self, trace_id: [u8; 16], span_id: [u8; 8]) -> i32 {
        if let Some(&i) = self.link_ix.get(&(trace_id, span_id)) {
            return i;
        }
        let i = index(self.links.len());
        self.links.push(Link {
            trace_id: trace_id.to_vec(),
            span_id: span_id.to_vec(),
        });
        self.link_ix.insert((trace_id, span_id), i);
        i
    }

    /// Index of the attribute `key = value` (no unit).
    pub fn attribute(&mut self, key: &str, value: AnyValue) -> i32 {
        self.attribute_with_unit(key, value, "")
    }

    /// Index of the attribute `key = value` measured in `unit` ("": none).
    pub fn attribute_with_unit(&mut self, key: &str, value: AnyValue, unit: &str) -> i32 {
        let key_strindex = self.string(key);
        let unit_strindex = if unit.is_empty() {
            0
        } else {
            self.string(unit)
        };
        let vk = ValueKey::of(Some(&value));
        let map_key = (key_strindex, vk, unit_strindex);
        if let Some(&i) = self.attribute_ix.get(&map_key) {
            return i;
        }
        let i = index(self.attributes.len());
        self.attributes.push(KeyValueAndUnit {
            key_strindex,
            value: Some(value),
            unit_strindex,
        });
        self.attribute_ix.insert(map_key, i);
        i
    }

    /// Index of a string attribute.
    pub fn attribute_str(&mut self, key: &str, value: &str) -> i32 {
        self.attribute(key, str_value(value))
    }

    /// Index of an integer attribute.
    pub fn attribute_int(&mut self, key: &str, value: i64) -> i32 {
        self.attribute(key, int_value(value))
    }

    /// Index of a boolean attribute.
    pub fn attribute_bool(&mut self, key: &str, value: bool) -> i32 {
        self.attribute(
            key,
            AnyValue {
                value: Some(any_value::Value::BoolValue(value)),
            },
        )
    }

    /// The finished dictionary.
    pub fn finish(self) -> ProfilesDictionary {
        ProfilesDictionary {
            mapping_table: self.mappings,
            location_table: self.locations,
            function_table: self.functions,
            link_table: self.links,
            string_table: self.strings,
            attribute_table: self.attributes,
            stack_table: self.stacks,
        }
    }
}

/// A string `AnyValue`.
pub fn str_value(s: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(s.to_owned())),
    }
}

/// An integer `AnyValue`.
pub fn int_value(i: i64) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::IntValue(i)),
    }
}

/// A double `AnyValue`.
pub fn double_value(d: f64) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::DoubleValue(d)),
    }
}

/// An array `AnyValue`.
pub fn array_value(values: Vec<AnyValue>) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::ArrayValue(ArrayValue { values })),
    }
}

/// A kvlist `AnyValue` with inline keys.
pub fn kvlist_value(entries: Vec<(String, AnyValue)>) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::KvlistValue(KeyValueList {
            values: entries
                .into_iter()
                .map(|(key, v)| KeyValue {
                    key,
                    value: Some(v),
                    key_strindex: 0,
                })
                .collect(),
        })),
    }
}

/// A plain resource `KeyValue` with an inline key and string value.
pub fn resource_kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(str_value(value)),
        key_strindex: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_entries_and_dedup() {
        let mut b = DictionaryBuilder::new();
        assert_eq!(b.string(""), 0);
        let a = b.string("a");
        assert_eq!(b.string("a"), a);
        assert_eq!(b.function(Function::default()), 0);
        let f = b.function(Function {
            name_strindex: a,
            ..Default::default()
        });
        assert_eq!(f, 1);
        assert_eq!(b.stack(vec![]), 0);
        let s1 = b.stack(vec![1, 2]);
        assert_eq!(b.stack(vec![1, 2]), s1);
        let l = b.link([1; 16], [2; 8]);
        assert_eq!(b.link([1; 16], [2; 8]), l);
        let x = b.attribute_int("thread.id", 5);
        assert_eq!(b.attribute_int("thread.id", 5), x);
        assert_ne!(b.attribute_str("thread.id", "5"), x);
        let d = b.finish();
        assert_eq!(d.string_table[0], "");
        assert_eq!(d.attribute_table[0], KeyValueAndUnit::default());
        assert_eq!(d.attribute_table[0].value, None);
        assert_eq!(d.link_table[0], Link::default());
        assert_eq!(d.location_table[0], Location::default());
        assert_eq!(d.mapping_table[0], Mapping::default());
        assert_eq!(d.stack_table[0], Stack::default());
    }
}
