//! A small pull parser over a JSON byte buffer that keeps the JSON path of the value being read.
//!
//! The decoder in [`super::decode`] drives it field by field, so no intermediate `Value` tree is
//! built and every error carries the path of the offending value. Strings without escapes are
//! borrowed from the input. Unknown values are skipped iteratively (no recursion), so arbitrarily
//! deep unknown subtrees cannot overflow the stack; the only recursion in the decoder is the
//! `AnyValue` nesting, which is bounded by [`MAX_ANY_VALUE_DEPTH`].

use super::OtlpJsonError;
use std::borrow::Cow;

mod tokens;

/// Maximum nesting of `AnyValue`s (`arrayValue` / `kvlistValue` inside each other) that the
/// decoder accepts; one more level is an error.
///
/// Note that prost's binary decoder has a message recursion limit of 100, which an `AnyValue`
/// nested about 45 levels deep (fewer with `kvlistValue`) already reaches: such a message
/// decodes from JSON but its protobuf encoding does not decode with prost.
pub const MAX_ANY_VALUE_DEPTH: usize = 32;

/// One step of a JSON path.
#[derive(Debug, Clone, Copy)]
enum Seg {
    Key(&'static str),
    Index(usize),
}

/// The kind of the next JSON value, from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

impl Kind {
    /// The name of the kind for error messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Object => "an object",
            Kind::Array => "an array",
            Kind::String => "a string",
            Kind::Number => "a number",
            Kind::Bool => "a boolean",
            Kind::Null => "null",
        }
    }
}

/// A scalar token read by [`Parser::scalar`].
#[derive(Debug)]
pub enum Scalar<'a> {
    /// A string (escapes resolved).
    Str(Cow<'a, str>),
    /// The text of a number, already checked against the JSON number grammar.
    Num(&'a str),
    /// `true` / `false`.
    Bool(bool),
}

/// Pull parser state.
pub struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
    path: Vec<Seg>,
    /// Current `AnyValue` nesting depth.
    pub any_depth: usize,
}

pub type Result<T> = std::result::Result<T, OtlpJsonError>;

/// Iteration state of an object being read (see [`Parser::begin_object`]).
pub struct ObjectIter {
    first: bool,
}

/// Iteration state of an array being read (see [`Parser::begin_array`]).
pub struct ArrayIter {
    first: bool,
    index: usize,
}

impl<'a> Parser<'a> {
    /// A parser over `bytes` (a leading UTF-8 byte order mark is skipped).
    pub fn new(bytes: &'a [u8]) -> Self {
        let pos = if bytes.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        Parser {
            bytes,
            pos,
            path: Vec::with_capacity(16),
            any_depth: 0,
        }
    }

    /// The current JSON path, `.` at the root.
    pub fn path_string(&self) -> String {
        if self.path.is_empty() {
            return ".".to_owned();
        }
        let mut s = String::new();
        for seg in &self.path {
            match seg {
                Seg::Key(k) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(k);
                }
                Seg::Index(i) => {
                    s.push('[');
                    s.push_str(&i.to_string());
                    s.push(']');
                }
            }
        }
        s
    }

    /// An error at the current path.
    pub fn error(&self, message: impl Into<String>) -> OtlpJsonError {
        OtlpJsonError {
            path: self.path_string(),
            message: message.into(),
        }
    }

    /// A syntax error at the current position, with line and column.
    fn syntax(&self, what: &str) -> OtlpJsonError {
        let upto = &self.bytes[..self.pos.min(self.bytes.len())];
        let line = upto.iter().filter(|&&b| b == b'\n').count() + 1;
        let col = upto.len() - upto.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
        let found = match self.bytes.get(self.pos) {
            None => "end of input".to_owned(),
            Some(&b) if b.is_ascii_graphic() => format!("'{}'", b as char),
            Some(&b) => format!("byte 0x{b:02x}"),
        };
        self.error(format!(
            "invalid JSON: {what}, found {found} at line {line} column {col} (byte {})",
            self.pos
        ))
    }

    /// Runs `f` with `key` pushed on the path; the key stays on the path if `f` fails.
    #[inline]
    pub fn in_key<T>(
        &mut self,
        key: &'static str,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        self.path.push(Seg::Key(key));
        let v = f(self)?;
        self.path.pop();
        Ok(v)
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(&b) = self.bytes.get(self.pos) {
            if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// Checks that only whitespace follows the top-level value.
    pub fn finish(&mut self) -> Result<()> {
        self.skip_ws();
        if self.pos < self.bytes.len() {
            return Err(self.syntax("expected end of input after the top-level value"));
        }
        Ok(())
    }

    /// The kind of the next value (skipping whitespace), or a syntax error.
    pub fn peek_kind(&mut self) -> Result<Kind> {
        self.skip_ws();
        match self.bytes.get(self.pos) {
            Some(b'{') => Ok(Kind::Object),
            Some(b'[') => Ok(Kind::Array),
            Some(b'"') => Ok(Kind::String),
            Some(b'-' | b'0'..=b'9') => Ok(Kind::Number),
            Some(b't' | b'f') => Ok(Kind::Bool),
            Some(b'n') => Ok(Kind::Null),
            _ => Err(self.syntax("expected a JSON value")),
        }
    }

    /// Consumes a `null` if one comes next; returns whether it did.
    #[inline]
    pub fn take_null(&mut self) -> Result<bool> {
        if self.peek_kind()? == Kind::Null {
            self.literal(b"null")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn literal(&mut self, lit: &[u8]) -> Result<()> {
        if self.bytes[self.pos..].starts_with(lit) {
            self.pos += lit.len();
            Ok(())
        } else {
            Err(self.syntax("invalid literal"))
        }
    }

    fn expect_kind(&mut self, want: Kind, what: &str) -> Result<()> {
        let k = self.peek_kind()?;
        if k == want {
            Ok(())
        } else {
            Err(self.error(format!("expected {what}, found {}", k.name())))
        }
    }

    /// Starts reading an object (the next value must be one).
    pub fn begin_object(&mut self, what: &str) -> Result<ObjectIter> {
        self.expect_kind(Kind::Object, what)?;
        self.pos += 1;
        Ok(ObjectIter { first: true })
    }

    /// The next key of the object (consuming the `:` after it), or `None` at its end.
    pub fn next_key(&mut self, it: &mut ObjectIter) -> Result<Option<Cow<'a, str>>> {
        self.skip_ws();
        match self.bytes.get(self.pos) {
            Some(b'}') => {
                self.pos += 1;
                return Ok(None);
            }
            Some(b',') if !it.first => {
                self.pos += 1;
                self.skip_ws();
            }
            _ if it.first => {}
            _ => return Err(self.syntax("expected ',' or '}' in object")),
        }
        it.first = false;
        if self.bytes.get(self.pos) != Some(&b'"') {
            return Err(self.syntax("expected a string key in object"));
        }
        let key = self.string_token()?;
        self.skip_ws();
        if self.bytes.get(self.pos) != Some(&b':') {
            return Err(self.syntax("expected ':' after object key"));
        }
        self.pos += 1;
        Ok(Some(key))
    }

    /// Starts reading an array (the next value must be one).
    pub fn begin_array(&mut self, what: &str) -> Result<ArrayIter> {
        self.expect_kind(Kind::Array, what)?;
        self.pos += 1;
        self.path.push(Seg::Index(0));
        Ok(ArrayIter {
            first: true,
            index: 0,
        })
    }

    /// Advances to the next element; `false` at the end of the array. While an element is
    /// read, its index is the last step of the path. A `null` element is an error.
    pub fn next_element(&mut self, it: &mut ArrayIter) -> Result<bool> {
        self.skip_ws();
        match self.bytes.get(self.pos) {
            Some(b']') => {
                self.pos += 1;
                self.path.pop();
                return Ok(false);
            }
            Some(b',') if !it.first => {
                self.pos += 1;
                it.index += 1;
            }
            _ if it.first => {}
            _ => return Err(self.syntax("expected ',' or ']' in array")),
        }
        it.first = false;
        if let Some(last) = self.path.last_mut() {
            *last = Seg::Index(it.index);
        }
        if self.take_null()? {
            return Err(self.error("null is not allowed as an element of a repeated field"));
        }
        Ok(true)
    }

    /// Reads a scalar (string, number or boolean); objects, arrays and `null` are errors
    /// naming `what` was expected.
    pub fn scalar(&mut self, what: &str) -> Result<Scalar<'a>> {
        match self.peek_kind()? {
            Kind::String => Ok(Scalar::Str(self.string_token()?)),
            Kind::Number => Ok(Scalar::Num(self.number_token()?)),
            Kind::Bool => {
                if self.bytes[self.pos] == b't' {
                    self.literal(b"true")?;
                    Ok(Scalar::Bool(true))
                } else {
                    self.literal(b"false")?;
                    Ok(Scalar::Bool(false))
                }
            }
            k => Err(self.error(format!("expected {what}, found {}", k.name()))),
        }
    }

    /// Reads a string value.
    pub fn string(&mut self) -> Result<Cow<'a, str>> {
        self.expect_kind(Kind::String, "a string")?;
        self.string_token()
    }

    /// Reads a boolean value.
    pub fn boolean(&mut self) -> Result<bool> {
        match self.scalar("a boolean")? {
            Scalar::Bool(b) => Ok(b),
            Scalar::Str(_) => Err(self.error("expected a boolean, found a string")),
            Scalar::Num(_) => Err(self.error("expected a boolean, found a number")),
        }
    }

    /// Skips one value of any kind, checking its syntax, without recursion.
    pub fn skip_value(&mut self) -> Result<()> {
        // Stack of open containers: true = object, false = array.
        let mut stack: Vec<bool> = Vec::new();
        loop {
            // Read one value start.
            match self.peek_kind()? {
                Kind::Object => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.bytes.get(self.pos) == Some(&b'}') {
                        self.pos += 1;
                    } else {
                        self.skip_key()?;
                        stack.push(true);
                        continue;
                    }
                }
                Kind::Array => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.bytes.get(self.pos) == Some(&b']') {
                        self.pos += 1;
                    } else {
                        stack.push(false);
                        continue;
                    }
                }
                Kind::String => {
                    self.string_token()?;
                }
                Kind::Number => {
                    self.number_token()?;
                }
                Kind::Bool => {
                    if self.bytes[self.pos] == b't' {
                        self.literal(b"true")?;
                    } else {
                        self.literal(b"false")?;
                    }
                }
                Kind::Null => self.literal(b"null")?,
            }
            // After a complete value: close containers or move to the next member.
            loop {
                let Some(&is_obj) = stack.last() else {
                    return Ok(());
                };
                self.skip_ws();
                match self.bytes.get(self.pos) {
                    Some(b',') => {
                        self.pos += 1;
                        if is_obj {
                            self.skip_ws();
                            self.skip_key()?;
                        }
                        break;
                    }
                    Some(b'}') if is_obj => {
                        self.pos += 1;
                        stack.pop();
                    }
                    Some(b']') if !is_obj => {
                        self.pos += 1;
                        stack.pop();
                    }
                    _ if is_obj => return Err(self.syntax("expected ',' or '}' in object")),
                    _ => return Err(self.syntax("expected ',' or ']' in array")),
                }
            }
        }
    }

    /// Skips `"key":` inside an object being skipped.
    fn skip_key(&mut self) -> Result<()> {
        if self.bytes.get(self.pos) != Some(&b'"') {
            return Err(self.syntax("expected a string key in object"));
        }
        self.string_token()?;
        self.skip_ws();
        if self.bytes.get(self.pos) != Some(&b':') {
            return Err(self.syntax("expected ':' after object key"));
        }
        self.pos += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
