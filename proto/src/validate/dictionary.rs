//! OTLP `ProfilesDictionary` rules: zero entries at index 0, references between tables, link id
//! lengths, mapping ranges.

use super::finding::{Elem, Finding, Severity};
use super::otlp_refs::{RefChecker, Table, needs_check};
use crate::otlp::{AnyValue, KeyValueAndUnit, Link, ProfilesDictionary};

/// Validates the dictionary on its own: zero entries, every cross-table index, link ids and
/// mapping ranges. `None` (no dictionary sent) is treated as an empty dictionary.
///
/// A table that is empty is only an error when something references it; references from
/// profiles are checked by [`super::validate_profile`].
pub fn validate_dictionary(dictionary: Option<&ProfilesDictionary>) -> Vec<Finding> {
    let empty = ProfilesDictionary::default();
    let d = dictionary.unwrap_or(&empty);
    let mut c = RefChecker::new(d, "dictionary");
    zero_entries(&mut c);
    for (i, m) in d.mapping_table.iter().enumerate() {
        let base = Elem("dictionary", "mapping_table", i);
        c.index(
            Table::String,
            m.filename_strindex,
            format_args!("{base}.filename_strindex"),
        );
        c.attribute_indices(&m.attribute_indices, &base);
        if m.memory_start > m.memory_limit {
            c.sink.error(
                "mapping-range",
                format_args!("{base}.memory_start"),
                format_args!(
                    "memory_start {:#x} is above memory_limit {:#x}",
                    m.memory_start, m.memory_limit
                ),
            );
        }
    }
    for (i, loc) in d.location_table.iter().enumerate() {
        let base = Elem("dictionary", "location_table", i);
        c.index(
            Table::Mapping,
            loc.mapping_index,
            format_args!("{base}.mapping_index"),
        );
        c.attribute_indices(&loc.attribute_indices, &base);
        for (j, line) in loc.lines.iter().enumerate() {
            c.index(
                Table::Function,
                line.function_index,
                format_args!("{base}.lines[{j}].function_index"),
            );
            for (field, n) in [("line", line.line), ("column", line.column)] {
                negative_line(&mut c, n, format_args!("{base}.lines[{j}].{field}"));
            }
        }
    }
    for (i, f) in d.function_table.iter().enumerate() {
        let base = Elem("dictionary", "function_table", i);
        for (field, idx) in [
            ("name_strindex", f.name_strindex),
            ("system_name_strindex", f.system_name_strindex),
            ("filename_strindex", f.filename_strindex),
        ] {
            c.index(Table::String, idx, format_args!("{base}.{field}"));
        }
        negative_line(&mut c, f.start_line, format_args!("{base}.start_line"));
    }
    for (i, link) in d.link_table.iter().enumerate() {
        for (field, id, want) in [
            ("trace_id", &link.trace_id, 16),
            ("span_id", &link.span_id, 8),
        ] {
            if !id.is_empty() && id.len() != want {
                c.sink.error(
                    "link-id-length",
                    format_args!("dictionary.link_table[{i}].{field}"),
                    format_args!("{field} is {} bytes; must be {want} or empty", id.len()),
                );
            }
        }
    }
    for (i, a) in d.attribute_table.iter().enumerate() {
        let base = Elem("dictionary", "attribute_table", i);
        c.index(
            Table::String,
            a.key_strindex,
            format_args!("{base}.key_strindex"),
        );
        c.index(
            Table::String,
            a.unit_strindex,
            format_args!("{base}.unit_strindex"),
        );
        if let Some(v) = a.value.as_ref().filter(|v| needs_check(v)) {
            c.any_value(v, &format!("{base}.value"));
        }
    }
    for (i, s) in d.stack_table.iter().enumerate() {
        for (j, &idx) in s.location_indices.iter().enumerate() {
            c.index(
                Table::Location,
                idx,
                format_args!("dictionary.stack_table[{i}].location_indices[{j}]"),
            );
        }
    }
    c.finish()
}

/// Negative line and column numbers are meaningless; consumers clamp them.
fn negative_line(c: &mut RefChecker<'_>, n: i64, path: std::fmt::Arguments<'_>) {
    if n < 0 {
        c.sink.warning(
            "negative-line-number",
            path,
            format_args!("{n} is negative; line and column numbers start at 1 (0 = unset)"),
        );
    }
}

/// Index 0 of every table must hold the zero value. A real entry there is a warning, not an
/// error: it is used as what it is, as the Collector's pdata reads it (async-profiler before
/// proto 1.10 wrote its first string, function, location and thread name at index 0), so an
/// index 0 in such a table means that entry, not "unset".
fn zero_entries(c: &mut RefChecker<'_>) {
    let d = c.dict;
    if let Some(s) = d.string_table.first().filter(|s| !s.is_empty()) {
        c.sink.warning(
            "string-table-zero",
            "dictionary.string_table[0]",
            format_args!(
                "string_table[0] is {s:?}; it must be the empty string (index 0 is read as {s:?}, as the Collector's pdata reads it)"
            ),
        );
    }
    let non_default = [
        (
            Table::Mapping,
            d.mapping_table
                .first()
                .is_some_and(|m| *m != Default::default()),
        ),
        (
            Table::Location,
            d.location_table
                .first()
                .is_some_and(|l| *l != Default::default()),
        ),
        (
            Table::Function,
            d.function_table
                .first()
                .is_some_and(|f| *f != Default::default()),
        ),
        (
            Table::Link,
            d.link_table.first().is_some_and(|l| !is_zero_link(l)),
        ),
        (
            Table::Stack,
            d.stack_table
                .first()
                .is_some_and(|s| *s != Default::default()),
        ),
    ];
    for (table, bad) in non_default {
        if bad {
            c.sink.warning(
                "table-zero",
                format_args!("dictionary.{}[0]", table.name()),
                format_args!(
                    "dictionary.{}[0] must be the zero value (all fields unset); index 0 is read as this entry, as the Collector's pdata reads it",
                    table.name()
                ),
            );
        }
    }
    if let Some(a) = d.attribute_table.first() {
        match attribute_zero(a) {
            Some(Severity::Error) => c.sink.warning(
                "table-zero",
                "dictionary.attribute_table[0]",
                "dictionary.attribute_table[0] must be the zero value KeyValueAndUnit{}; index 0 is read as this entry, as the Collector's pdata reads it",
            ),
            Some(Severity::Warning) => c.sink.warning(
                "attribute-table-zero-empty-value",
                "dictionary.attribute_table[0].value",
                "attribute_table[0] has a present but empty AnyValue instead of no value \
                 (as the eBPF profiler and Collector pdata write it); treated as the zero value",
            ),
            None => {}
        }
    }
}

/// The zero link: no ids, or all-zero ids (the spec allows 16/8 zero bytes for codecs that need
/// fixed lengths).
fn is_zero_link(l: &Link) -> bool {
    l.trace_id.iter().all(|b| *b == 0)
        && l.span_id.iter().all(|b| *b == 0)
        && matches!(l.trace_id.len(), 0 | 16)
        && matches!(l.span_id.len(), 0 | 8)
}

/// `None` for `KeyValueAndUnit{}`, a warning for the pdata form with an empty `AnyValue`, an
/// error for anything else.
fn attribute_zero(a: &KeyValueAndUnit) -> Option<Severity> {
    if a.key_strindex != 0 || a.unit_strindex != 0 {
        return Some(Severity::Error);
    }
    match &a.value {
        None => None,
        Some(AnyValue { value: None }) => Some(Severity::Warning),
        Some(_) => Some(Severity::Error),
    }
}
