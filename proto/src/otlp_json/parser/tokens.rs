//! The JSON tokens the pull parser reads: strings (escapes resolved, surrogate pairs joined,
//! UTF-8 checked; borrowed from the input when they hold no escape) and numbers (checked
//! against the JSON number grammar, kept as text for the exact number parsing).

use super::{Parser, Result};
use std::borrow::Cow;

impl<'a> Parser<'a> {
    /// Reads a string token starting at the current `"`.
    pub(super) fn string_token(&mut self) -> Result<Cow<'a, str>> {
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
    pub(super) fn number_token(&mut self) -> Result<&'a str> {
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
}
