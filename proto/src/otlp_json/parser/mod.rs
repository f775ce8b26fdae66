// Over 600 lines on purpose: one idea, the pull parser; a third of the file is its tests.
//! A small pull parser over a JSON byte buffer that keeps the JSON path of the value being read.
//!
//! The decoder in [`super::decode`] drives it field by field, so no intermediate `Value` tree is
//! built and every error carries the path of the offending value. Strings without escapes are
//! borrowed from the input. Unknown values are skipped iteratively (no recursion), so arbitrarily
//! deep unknown subtrees cannot overflow the stack; the only recursion in the decoder is the
//! `AnyValue` nesting, which is bounded by [`MAX_ANY_VALUE_DEPTH`].

use super::OtlpJsonError;
use std::borrow::Cow;

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

    /// Reads a string token starting at the current `"`.
    fn string_token(&mut self) -> Result<Cow<'a, str>> {
        let start = self.pos + 1;
        let mut i = start;
        let mut has_escape = false;
        loop {
            match self.bytes.get(i) {
                None => {
                    self.pos = i;
                    return Err(self.syntax("unterminated string"));
                }
                Some(b'"') => break,
                Some(b'\\') => {
                    has_escape = true;
                    // Skip the escaped byte so that `\"` does not end the string; the escape
                    // itself is checked below.
                    i += 2;
                }
                Some(&b) if b < 0x20 => {
                    self.pos = i;
                    return Err(self.syntax("control character in string"));
                }
                Some(_) => i += 1,
            }
        }
        let raw = &self.bytes[start..i];
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(e) => {
                self.pos = start + e.valid_up_to();
                return Err(self.syntax("invalid UTF-8 in string"));
            }
        };
        let end = i + 1;
        if !has_escape {
            self.pos = end;
            return Ok(Cow::Borrowed(text));
        }
        let mut out = String::with_capacity(text.len());
        let tb = text.as_bytes();
        let mut j = 0;
        let mut run = 0;
        while j < tb.len() {
            if tb[j] != b'\\' {
                j += 1;
                continue;
            }
            out.push_str(&text[run..j]);
            let esc = tb.get(j + 1).copied();
            j += 2;
            match esc {
                Some(b'"') => out.push('"'),
                Some(b'\\') => out.push('\\'),
                Some(b'/') => out.push('/'),
                Some(b'b') => out.push('\u{8}'),
                Some(b'f') => out.push('\u{c}'),
                Some(b'n') => out.push('\n'),
                Some(b'r') => out.push('\r'),
                Some(b't') => out.push('\t'),
                Some(b'u') => {
                    let hi = self.hex4(tb, j, start)?;
                    j += 4;
                    let c = if (0xD800..0xDC00).contains(&hi) {
                        if tb.get(j) == Some(&b'\\') && tb.get(j + 1) == Some(&b'u') {
                            let lo = self.hex4(tb, j + 2, start)?;
                            if !(0xDC00..0xE000).contains(&lo) {
                                self.pos = start + j;
                                return Err(self.syntax("invalid low surrogate in \\u escape"));
                            }
                            j += 6;
                            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                        } else {
                            self.pos = start + j;
                            return Err(self.syntax("lone leading surrogate in \\u escape"));
                        }
                    } else if (0xDC00..0xE000).contains(&hi) {
                        self.pos = start + j;
                        return Err(self.syntax("lone trailing surrogate in \\u escape"));
                    } else {
                        hi
                    };
                    match char::from_u32(c) {
                        Some(ch) => out.push(ch),
                        None => {
                            self.pos = start + j;
                            return Err(self.syntax("invalid \\u escape"));
                        }
                    }
                }
                _ => {
                    self.pos = start + j - 1;
                    return Err(self.syntax("invalid escape in string"));
                }
            }
            run = j;
        }
        out.push_str(&text[run.min(text.len())..]);
        self.pos = end;
        Ok(Cow::Owned(out))
    }

    fn hex4(&mut self, tb: &[u8], at: usize, base: usize) -> Result<u32> {
        let mut v = 0u32;
        for k in 0..4 {
            let d = match tb.get(at + k) {
                Some(&b) => (b as char).to_digit(16),
                None => None,
            };
            match d {
                Some(d) => v = v * 16 + d,
                None => {
                    self.pos = base + at + k;
                    return Err(self.syntax("expected 4 hex digits in \\u escape"));
                }
            }
        }
        Ok(v)
    }

    /// Reads a number token, checking the JSON number grammar.
    fn number_token(&mut self) -> Result<&'a str> {
        let b = self.bytes;
        let start = self.pos;
        let mut i = start;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while matches!(b.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            _ => {
                self.pos = i;
                return Err(self.syntax("invalid number"));
            }
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if !matches!(b.get(i), Some(b'0'..=b'9')) {
                self.pos = i;
                return Err(self.syntax("expected a digit after '.' in number"));
            }
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !matches!(b.get(i), Some(b'0'..=b'9')) {
                self.pos = i;
                return Err(self.syntax("expected a digit in number exponent"));
            }
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        self.pos = i;
        // The token is ASCII by construction.
        std::str::from_utf8(&b[start..i]).map_err(|_| self.syntax("invalid number"))
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
mod tests {
    use super::*;

    fn skip_all(s: &str) -> Result<()> {
        let mut p = Parser::new(s.as_bytes());
        p.skip_value()?;
        p.finish()
    }

    #[test]
    fn skips_valid_json() {
        for s in [
            "null",
            "true",
            "false",
            "0",
            "-1.5e+3",
            r#""a\"b\u00e9\ud83d\ude00""#,
            "[]",
            "{}",
            r#"{"a":[1,{"b":[[],{}]},"x"],"c":null}"#,
            " [ 1 , 2 ] ",
        ] {
            skip_all(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    }

    #[test]
    fn rejects_invalid_json() {
        for s in [
            "",
            "[",
            "{",
            "[1,]",
            "{\"a\"}",
            "{\"a\":1,}",
            "01",
            "1.",
            "-",
            "1e",
            "tru",
            "nul",
            "\"abc",
            "\"\\x\"",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "[1 2]",
            "{\"a\":1 \"b\":2}",
            "{1:2}",
            "[}",
            "{]",
            "1 2",
        ] {
            assert!(skip_all(s).is_err(), "{s:?} should fail");
        }
    }

    #[test]
    fn deep_skip_does_not_recurse() {
        let s = "[".repeat(100_000) + &"]".repeat(100_000);
        skip_all(&s).unwrap();
        let s = "[".repeat(100_000);
        assert!(skip_all(&s).is_err());
    }

    #[test]
    fn strings_unescape() {
        let mut p = Parser::new(br#""a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\ud83d\ude00""#);
        assert_eq!(
            p.string().unwrap(),
            "a\"b\\c/d\u{8}\u{c}\n\r\tA\u{e9}\u{1f600}"
        );
        let mut p = Parser::new(b"\"plain\"");
        assert!(matches!(p.string().unwrap(), Cow::Borrowed("plain")));
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut p = Parser::new(b"\"a\xff\"");
        let e = p.string().unwrap_err();
        assert!(e.message.contains("UTF-8"), "{e}");
    }

    #[test]
    fn syntax_errors_report_line_and_column() {
        let mut p = Parser::new(b"{\n  \"a\" 1}");
        let mut it = p.begin_object("an object").unwrap();
        let e = p.next_key(&mut it).unwrap_err();
        assert!(e.message.contains("line 2 column 7"), "{e}");
        assert_eq!(e.path, ".");
    }
}
