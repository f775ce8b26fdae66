//! Writing symbolized frames into an OTLP dictionary.
//!
//! A symbolized location gets `lines`, innermost inline level first (as OTLP orders them), each
//! with a `Function` (`name` = the demangled name, `system_name` = the name as the object
//! spells it, `filename` = the source path) and the line number (0 when unknown). Its `address`
//! and `mapping_index` stay, so a later symbolizer (or Sentry, from the debug image) can still
//! work from the address, and it gets the attribute `profilink.symbolized = true`. Strings and
//! functions added are deduplicated among themselves; existing table entries are not touched.

use crate::object::SymFrame;
use profilink_proto::otlp::{
    AnyValue, Function, KeyValueAndUnit, Line, ProfilesDictionary, any_value,
};
use std::collections::HashMap;

/// Location attribute marking a location symbolized by profilink.
pub const SYMBOLIZED_KEY: &str = "profilink.symbolized";

/// Adds strings, functions and the marker attribute to one dictionary.
pub(crate) struct Writer<'d> {
    d: &'d mut ProfilesDictionary,
    strings: Option<HashMap<String, i32>>,
    functions: HashMap<(i32, i32, i32), i32>,
    marker: Option<i32>,
}

impl<'d> Writer<'d> {
    pub(crate) fn new(d: &'d mut ProfilesDictionary) -> Self {
        Writer {
            d,
            strings: None,
            functions: HashMap::new(),
            marker: None,
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if s.is_empty() && !self.d.string_table.is_empty() && self.d.string_table[0].is_empty() {
            return 0;
        }
        let table = &mut self.d.string_table;
        let map = self.strings.get_or_insert_with(|| {
            let mut m = HashMap::with_capacity(table.len());
            for (i, s) in table.iter().enumerate() {
                if let Ok(i) = i32::try_from(i) {
                    m.entry(s.clone()).or_insert(i);
                }
            }
            m
        });
        if let Some(&i) = map.get(s) {
            return i;
        }
        if table.is_empty() {
            // Index 0 must stay the empty string.
            table.push(String::new());
            map.insert(String::new(), 0);
            if s.is_empty() {
                return 0;
            }
        }
        let i = table.len() as i32;
        table.push(s.to_owned());
        map.insert(s.to_owned(), i);
        i
    }

    fn function(&mut self, f: &SymFrame) -> i32 {
        let key = (
            self.string(&f.function),
            self.string(&f.system_name),
            self.string(&f.file),
        );
        if let Some(&i) = self.functions.get(&key) {
            return i;
        }
        if self.d.function_table.is_empty() {
            self.d.function_table.push(Function::default());
        }
        let i = self.d.function_table.len() as i32;
        self.d.function_table.push(Function {
            name_strindex: key.0,
            system_name_strindex: key.1,
            filename_strindex: key.2,
            start_line: 0,
        });
        self.functions.insert(key, i);
        i
    }

    fn marker(&mut self) -> i32 {
        if let Some(m) = self.marker {
            return m;
        }
        if self.d.attribute_table.is_empty() {
            self.d.attribute_table.push(KeyValueAndUnit::default());
        }
        let key_strindex = self.string(SYMBOLIZED_KEY);
        let i = self.d.attribute_table.len() as i32;
        self.d.attribute_table.push(KeyValueAndUnit {
            key_strindex,
            value: Some(AnyValue {
                value: Some(any_value::Value::BoolValue(true)),
            }),
            unit_strindex: 0,
        });
        self.marker = Some(i);
        i
    }

    /// The address of location `index` (0 when out of range).
    pub(crate) fn address(&self, index: usize) -> u64 {
        self.d.location_table.get(index).map_or(0, |l| l.address)
    }

    /// Gives location `index` the lines of `frames` (innermost first) and the marker.
    pub(crate) fn set(&mut self, index: usize, frames: &[SymFrame]) {
        let lines: Vec<Line> = frames
            .iter()
            .map(|f| Line {
                function_index: self.function(f),
                line: i64::from(f.line),
                column: 0,
            })
            .collect();
        let marker = self.marker();
        if let Some(loc) = self.d.location_table.get_mut(index) {
            loc.lines = lines;
            loc.attribute_indices.push(marker);
        }
    }
}
