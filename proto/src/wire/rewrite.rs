//! A schema-aware rewrite of a binary `ExportProfilesServiceRequest` (or `ProfilesData`) at the
//! wire level: invalid UTF-8 in string fields replaced with U+FFFD, and optionally the proto
//! 1.9 `Sample` layout renumbered to 1.10's.
//!
//! Only the messages on the way to a string field or a `Sample` are walked; every other field
//! (and every unknown field) is copied byte for byte. Nesting is bounded ([`MAX_DEPTH`]), as
//! prost bounds its own recursion.

use super::SampleLayout;

/// Deepest nesting of messages walked (prost's recursion limit is 100).
pub(crate) const MAX_DEPTH: usize = 100;

/// What a field of a walked message holds.
#[derive(Clone, Copy)]
enum Field {
    /// A `string` (or `repeated string`): repaired.
    Str,
    /// A message of this kind: walked.
    Msg(Kind),
    /// Anything else: copied.
    Other,
}

/// The messages walked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Request,
    Dictionary,
    KeyValueAndUnit,
    ResourceProfiles,
    Resource,
    EntityRef,
    ScopeProfiles,
    Scope,
    Profile,
    Sample,
    KeyValue,
    AnyValue,
    ArrayValue,
    KeyValueList,
}

fn field(kind: Kind, number: u32) -> Field {
    use Field::{Msg, Other, Str};
    match (kind, number) {
        (Kind::Request, 1) => Msg(Kind::ResourceProfiles),
        (Kind::Request, 2) => Msg(Kind::Dictionary),
        (Kind::Dictionary, 5) => Str,
        (Kind::Dictionary, 6) => Msg(Kind::KeyValueAndUnit),
        (Kind::KeyValueAndUnit, 2) => Msg(Kind::AnyValue),
        (Kind::ResourceProfiles, 1) => Msg(Kind::Resource),
        (Kind::ResourceProfiles, 2) => Msg(Kind::ScopeProfiles),
        (Kind::ResourceProfiles | Kind::ScopeProfiles, 3) => Str,
        (Kind::Resource, 1) => Msg(Kind::KeyValue),
        (Kind::Resource, 3) => Msg(Kind::EntityRef),
        (Kind::EntityRef, 1..=4) => Str,
        (Kind::ScopeProfiles, 1) => Msg(Kind::Scope),
        (Kind::ScopeProfiles, 2) => Msg(Kind::Profile),
        (Kind::Scope, 1 | 2) => Str,
        (Kind::Scope, 3) => Msg(Kind::KeyValue),
        (Kind::Profile, 2) => Msg(Kind::Sample),
        (Kind::Profile, 9) => Str,
        (Kind::KeyValue, 1) => Str,
        (Kind::KeyValue, 2) => Msg(Kind::AnyValue),
        (Kind::AnyValue, 1) => Str,
        (Kind::AnyValue, 5) => Msg(Kind::ArrayValue),
        (Kind::AnyValue, 6) => Msg(Kind::KeyValueList),
        (Kind::ArrayValue, 1) => Msg(Kind::AnyValue),
        (Kind::KeyValueList, 1) => Msg(Kind::KeyValue),
        _ => Other,
    }
}

/// Why bytes could not be walked (they are not a protobuf message of this schema).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireError(pub &'static str);

/// The result of a rewrite.
pub(crate) struct Rewritten {
    /// The rewritten message.
    pub bytes: Vec<u8>,
    /// Invalid UTF-8 sequences replaced (one U+FFFD each).
    pub replacements: u64,
    /// `Sample` fields renumbered.
    pub renumbered: u64,
}

/// Rewrites `input` read in `layout` into valid-UTF-8 proto 1.10.
pub(crate) fn rewrite(input: &[u8], layout: SampleLayout) -> Result<Rewritten, WireError> {
    let mut w = Walker {
        layout,
        replacements: 0,
        renumbered: 0,
    };
    let mut bytes = Vec::with_capacity(input.len() + input.len() / 16);
    w.message(Kind::Request, input, &mut bytes, 0)?;
    Ok(Rewritten {
        bytes,
        replacements: w.replacements,
        renumbered: w.renumbered,
    })
}

struct Walker {
    layout: SampleLayout,
    replacements: u64,
    renumbered: u64,
}

fn varint(input: &[u8], pos: &mut usize) -> Result<u64, WireError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *input.get(*pos).ok_or(WireError("truncated varint"))?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(WireError("varint longer than 10 bytes"))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Walker {
    fn message(
        &mut self,
        kind: Kind,
        input: &[u8],
        out: &mut Vec<u8>,
        depth: usize,
    ) -> Result<(), WireError> {
        if depth > MAX_DEPTH {
            return Err(WireError("messages nested too deeply"));
        }
        let mut pos = 0;
        while pos < input.len() {
            let key = varint(input, &mut pos)?;
            let wire_type = (key & 7) as u8;
            let number =
                u32::try_from(key >> 3).map_err(|_| WireError("field number too large"))?;
            if number == 0 {
                return Err(WireError("field number 0"));
            }
            let out_number = if kind == Kind::Sample && self.layout == SampleLayout::V1_9 {
                // 1.9: values=2, attribute_indices=3, link_index=4; 1.10: 4, 2, 3.
                match number {
                    2 => 4,
                    3 => 2,
                    4 => 3,
                    n => n,
                }
            } else {
                number
            };
            if out_number != number {
                self.renumbered += 1;
            }
            let start = pos;
            match wire_type {
                0 => {
                    varint(input, &mut pos)?;
                }
                1 => pos = pos.checked_add(8).ok_or(WireError("truncated fixed64"))?,
                5 => pos = pos.checked_add(4).ok_or(WireError("truncated fixed32"))?,
                2 => {
                    let len = usize::try_from(varint(input, &mut pos)?)
                        .map_err(|_| WireError("length too large"))?;
                    let end = pos
                        .checked_add(len)
                        .filter(|&e| e <= input.len())
                        .ok_or(WireError("truncated length-delimited field"))?;
                    let body = &input[pos..end];
                    pos = end;
                    put_varint(out, (u64::from(out_number) << 3) | 2);
                    match field(kind, number) {
                        Field::Str => self.string(body, out),
                        Field::Msg(sub) => {
                            let mut nested = Vec::with_capacity(body.len());
                            self.message(sub, body, &mut nested, depth + 1)?;
                            put_varint(out, nested.len() as u64);
                            out.extend_from_slice(&nested);
                        }
                        Field::Other => {
                            put_varint(out, body.len() as u64);
                            out.extend_from_slice(body);
                        }
                    }
                    continue;
                }
                _ => return Err(WireError("unsupported wire type (groups or invalid)")),
            }
            if pos > input.len() {
                return Err(WireError("truncated field"));
            }
            put_varint(out, (u64::from(out_number) << 3) | u64::from(wire_type));
            out.extend_from_slice(&input[start..pos]);
        }
        Ok(())
    }

    /// Writes a string field's length and bytes, invalid UTF-8 replaced (counted).
    fn string(&mut self, body: &[u8], out: &mut Vec<u8>) {
        if std::str::from_utf8(body).is_ok() {
            put_varint(out, body.len() as u64);
            out.extend_from_slice(body);
            return;
        }
        let mut fixed = String::with_capacity(body.len() + 3);
        for chunk in body.utf8_chunks() {
            fixed.push_str(chunk.valid());
            if !chunk.invalid().is_empty() {
                fixed.push(char::REPLACEMENT_CHARACTER);
                self.replacements += 1;
            }
        }
        put_varint(out, fixed.len() as u64);
        out.extend_from_slice(fixed.as_bytes());
    }
}
