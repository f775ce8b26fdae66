//! Reference checking against an OTLP `ProfilesDictionary`: index ranges, attribute key
//! uniqueness, string references inside attribute values, and the "table referenced but empty"
//! rule.

use super::finding::{Finding, Sink};
use crate::otlp::{AnyValue, KeyValue, ProfilesDictionary, ValueType, any_value};
use std::collections::HashMap;
use std::fmt::Display;

/// The dictionary tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    String,
    Mapping,
    Location,
    Function,
    Link,
    Attribute,
    Stack,
}

impl Table {
    const ALL: [Table; 7] = [
        Table::String,
        Table::Mapping,
        Table::Location,
        Table::Function,
        Table::Link,
        Table::Attribute,
        Table::Stack,
    ];

    /// The field name in `ProfilesDictionary`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Table::String => "string_table",
            Table::Mapping => "mapping_table",
            Table::Location => "location_table",
            Table::Function => "function_table",
            Table::Link => "link_table",
            Table::Attribute => "attribute_table",
            Table::Stack => "stack_table",
        }
    }

    fn len(self, d: &ProfilesDictionary) -> usize {
        match self {
            Table::String => d.string_table.len(),
            Table::Mapping => d.mapping_table.len(),
            Table::Location => d.location_table.len(),
            Table::Function => d.function_table.len(),
            Table::Link => d.link_table.len(),
            Table::Attribute => d.attribute_table.len(),
            Table::Stack => d.stack_table.len(),
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// Checks references from one object (the dictionary itself, a profile, a resource) into the
/// dictionary, collecting findings in a bounded [`Sink`].
pub(crate) struct RefChecker<'a> {
    pub(crate) dict: &'a ProfilesDictionary,
    pub(crate) sink: Sink,
    referenced: u8,
}

impl<'a> RefChecker<'a> {
    /// A checker whose summary findings name `scope`.
    pub(crate) fn new(dict: &'a ProfilesDictionary, scope: impl Into<String>) -> Self {
        RefChecker {
            dict,
            sink: Sink::new(scope),
            referenced: 0,
        }
    }

    /// Checks that `idx` is a valid index into `table`; returns it as `usize` when it is.
    ///
    /// Index 0 into an empty table is not reported here: [`Self::finish`] reports the missing
    /// zero entry once per table instead.
    pub(crate) fn index(&mut self, table: Table, idx: i32, path: impl Display) -> Option<usize> {
        self.referenced |= table.bit();
        let len = table.len(self.dict);
        match usize::try_from(idx) {
            Ok(i) if i < len => Some(i),
            Ok(0) => None,
            _ => {
                self.sink.error(
                    "index-out-of-range",
                    path,
                    format_args!(
                        "index {idx} is out of range for dictionary.{} (length {len})",
                        table.name()
                    ),
                );
                None
            }
        }
    }

    /// The string at `idx`, when in range (no finding either way).
    pub(crate) fn string(&self, idx: i32) -> Option<&'a str> {
        let i = usize::try_from(idx).ok()?;
        self.dict.string_table.get(i).map(String::as_str)
    }

    /// Checks a `ValueType`'s two string references.
    pub(crate) fn value_type(&mut self, vt: &ValueType, base: &dyn Display) {
        self.index(
            Table::String,
            vt.type_strindex,
            format_args!("{base}.type_strindex"),
        );
        self.index(
            Table::String,
            vt.unit_strindex,
            format_args!("{base}.unit_strindex"),
        );
    }

    /// Checks an `attribute_indices` list: every index in range and no key twice.
    pub(crate) fn attribute_indices(&mut self, indices: &[i32], base: &dyn Display) {
        let mut keys: Vec<(&'a str, usize)> = Vec::new();
        let mut big: Option<HashMap<&'a str, usize>> = None;
        for (pos, &idx) in indices.iter().enumerate() {
            let Some(i) = self.index(
                Table::Attribute,
                idx,
                format_args!("{base}.attribute_indices[{pos}]"),
            ) else {
                continue;
            };
            if indices.len() < 2 {
                continue;
            }
            let Some(key) = self.string(self.dict.attribute_table[i].key_strindex) else {
                continue;
            };
            let previous = match big.as_mut() {
                Some(map) => map.insert(key, pos),
                None => {
                    let prev = keys.iter().find(|k| k.0 == key).map(|k| k.1);
                    keys.push((key, pos));
                    if keys.len() > 32 {
                        big = Some(keys.drain(..).collect());
                    }
                    prev
                }
            };
            if let Some(prev) = previous {
                self.sink.error(
                    "duplicate-attribute-key",
                    format_args!("{base}.attribute_indices[{pos}]"),
                    format_args!(
                        "attribute key {key:?} is already set by attribute_indices[{prev}]; \
                         keys must be unique within one attribute list"
                    ),
                );
            }
        }
    }

    /// Checks a `KeyValue` (resource, scope or nested attribute) and its value.
    pub(crate) fn key_value(&mut self, kv: &KeyValue, path: &str) {
        if kv.key.is_empty() || kv.key_strindex != 0 {
            self.index(
                Table::String,
                kv.key_strindex,
                format_args!("{path}.key_strindex"),
            );
        }
        if let Some(v) = &kv.value
            && needs_check(v)
        {
            self.any_value(v, &format!("{path}.value"));
        }
    }

    /// Checks string references inside an `AnyValue`, recursing into arrays and key-value lists.
    pub(crate) fn any_value(&mut self, v: &AnyValue, path: &str) {
        match &v.value {
            Some(any_value::Value::StringValueStrindex(i)) => {
                self.index(
                    Table::String,
                    *i,
                    format_args!("{path}.string_value_strindex"),
                );
            }
            Some(any_value::Value::ArrayValue(a)) => {
                for (j, item) in a.values.iter().enumerate() {
                    if needs_check(item) {
                        self.any_value(item, &format!("{path}.array_value.values[{j}]"));
                    }
                }
            }
            Some(any_value::Value::KvlistValue(l)) => {
                for (j, kv) in l.values.iter().enumerate() {
                    self.key_value(kv, &format!("{path}.kvlist_value.values[{j}]"));
                }
            }
            _ => {}
        }
    }

    /// The findings, plus one "zero entry missing" warning for every referenced table that is
    /// empty. References with index 0 mean "unset" and still resolve; any other index into an
    /// empty table is already an `index-out-of-range` error, so the data stays usable and real
    /// producers that omit unused tables are not rejected.
    pub(crate) fn finish(mut self) -> Vec<Finding> {
        for table in Table::ALL {
            if self.referenced & table.bit() != 0 && table.len(self.dict) == 0 {
                self.sink.warning(
                    "table-zero-missing",
                    format_args!("dictionary.{}", table.name()),
                    format_args!(
                        "dictionary.{} is empty; its zero entry should be present at index 0",
                        table.name()
                    ),
                );
            }
        }
        self.sink.finish()
    }
}

/// True when an `AnyValue` holds something that can reference the string table.
pub(crate) fn needs_check(v: &AnyValue) -> bool {
    matches!(
        v.value,
        Some(
            any_value::Value::StringValueStrindex(_)
                | any_value::Value::ArrayValue(_)
                | any_value::Value::KvlistValue(_)
        )
    )
}
