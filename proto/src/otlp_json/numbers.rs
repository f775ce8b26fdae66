//! Exact parsing of integers and doubles from JSON number text or from JSON strings, and the
//! integer/double formatting used by the encoder.
//!
//! proto3 JSON accepts integers as numbers or as decimal strings, exponent notation included,
//! as long as the value is integral: `"12"`, `12`, `1.2e1` and `"120e-1"` all mean 12. The
//! parse is exact (no detour through `f64`), so `"18446744073709551615"` and
//! `1.8446744073709551615e19` are both `u64::MAX`.

use super::shown;

/// An integer target type, for range checks and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntType {
    /// `int32`
    I32,
    /// `uint32`
    U32,
    /// `int64`, `sfixed64`
    I64,
    /// `uint64`, `fixed64`
    U64,
}

impl IntType {
    fn name(self) -> &'static str {
        match self {
            IntType::I32 => "int32",
            IntType::U32 => "uint32",
            IntType::I64 => "int64",
            IntType::U64 => "uint64",
        }
    }

    fn range(self) -> (i128, i128) {
        match self {
            IntType::I32 => (i32::MIN as i128, i32::MAX as i128),
            IntType::U32 => (0, u32::MAX as i128),
            IntType::I64 => (i64::MIN as i128, i64::MAX as i128),
            IntType::U64 => (0, u64::MAX as i128),
        }
    }
}

/// Parses decimal text (`-?digits(.digits)?([eE][+-]?digits)?`, leading zeros allowed) as an
/// exact integer of type `ty`.
pub fn parse_int(text: &str, ty: IntType) -> Result<i128, String> {
    let b = text.as_bytes();
    // Fast path: plain non-negative decimal of up to 18 digits.
    if !b.is_empty() && b.len() <= 18 && b.iter().all(u8::is_ascii_digit) {
        let v = b.iter().fold(0i128, |v, &d| v * 10 + i128::from(d - b'0'));
        let (_, hi) = ty.range();
        if v <= hi {
            return Ok(v);
        }
    }
    let mut i = 0;
    let negative = b.first() == Some(&b'-');
    if negative {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &b[int_start..i];
    let mut frac_digits: &[u8] = &[];
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let fs = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = &b[fs..i];
    }
    let mut exp: i64 = 0;
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        let mut exp_neg = false;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            exp_neg = b[i] == b'-';
            i += 1;
        }
        let es = i;
        while i < b.len() && b[i].is_ascii_digit() {
            // Saturate: anything beyond ±1e9 is out of range or fractional anyway.
            exp = (exp * 10 + i64::from(b[i] - b'0')).min(1_000_000_000);
            i += 1;
        }
        if i == es {
            return Err(format!(
                "{} is not a valid {} integer",
                shown(text),
                ty.name()
            ));
        }
        if exp_neg {
            exp = -exp;
        }
    }
    if i != b.len() || (int_digits.is_empty() && frac_digits.is_empty()) {
        return Err(format!(
            "{} is not a valid {} integer",
            shown(text),
            ty.name()
        ));
    }
    // All significant digits and the power of ten that applies to them.
    let digits: Vec<u8> = int_digits
        .iter()
        .chain(frac_digits.iter())
        .copied()
        .skip_while(|&d| d == b'0')
        .collect();
    let mut exp = exp - frac_digits.len() as i64;
    let mut digits: &[u8] = &digits;
    if digits.is_empty() {
        return Ok(0);
    }
    // Trailing zeros move into the exponent.
    while let [rest @ .., b'0'] = digits {
        digits = rest;
        exp += 1;
    }
    if exp < 0 {
        return Err(format!(
            "{} is not an integer (it has a fractional part)",
            shown(text)
        ));
    }
    let out_of_range = || format!("{} is out of range for {}", shown(text), ty.name());
    if digits.len() as i64 + exp > 39 {
        return Err(out_of_range());
    }
    let mut v: i128 = 0;
    for &d in digits {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(i128::from(d - b'0')))
            .ok_or_else(out_of_range)?;
    }
    for _ in 0..exp {
        v = v.checked_mul(10).ok_or_else(out_of_range)?;
    }
    if negative {
        v = -v;
    }
    let (lo, hi) = ty.range();
    if v < lo {
        if negative && lo == 0 {
            return Err(format!(
                "{} is negative, which {} does not allow",
                shown(text),
                ty.name()
            ));
        }
        return Err(out_of_range());
    }
    if v > hi {
        return Err(out_of_range());
    }
    Ok(v)
}

/// Parses the text of a double: a JSON number, or (from a string) also `NaN`, `Infinity` and
/// `-Infinity`. Finite text that overflows to infinity is an error.
pub fn parse_double(text: &str, from_string: bool) -> Result<f64, String> {
    if from_string {
        match text {
            "NaN" => return Ok(f64::NAN),
            "Infinity" => return Ok(f64::INFINITY),
            "-Infinity" => return Ok(f64::NEG_INFINITY),
            _ => {}
        }
        if !is_json_number(text) {
            return Err(format!("{} is not a valid double", shown(text)));
        }
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(format!("{} is out of range for a double", shown(text))),
        Err(_) => Err(format!("{} is not a valid double", shown(text))),
    }
}

/// True when `s` matches the JSON number grammar.
fn is_json_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'-') {
        i = 1;
    }
    let ds = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i == ds || (b[ds] == b'0' && i - ds > 1) {
        return false;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let fs = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == fs {
            return false;
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let es = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == es {
            return false;
        }
    }
    i == b.len()
}

/// Appends the decimal form of `v`.
pub fn write_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends the decimal form of `v`.
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(out, v.unsigned_abs());
}

/// Appends a double as proto3 JSON: a number, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if v == f64::INFINITY {
        out.extend_from_slice(b"\"Infinity\"");
    } else if v == f64::NEG_INFINITY {
        out.extend_from_slice(b"\"-Infinity\"");
    } else {
        let mut buf = ryu::Buffer::new();
        out.extend_from_slice(buf.format_finite(v).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_exactly() {
        assert_eq!(parse_int("0", IntType::U64), Ok(0));
        assert_eq!(parse_int("-0", IntType::U64), Ok(0));
        assert_eq!(parse_int("007", IntType::I32), Ok(7));
        assert_eq!(parse_int("1.2e1", IntType::I32), Ok(12));
        assert_eq!(parse_int("120e-1", IntType::I32), Ok(12));
        assert_eq!(parse_int("1.0", IntType::I32), Ok(1));
        assert_eq!(parse_int("0.0e5", IntType::I32), Ok(0));
        assert_eq!(parse_int("0e-99999999999999", IntType::I32), Ok(0));
        assert_eq!(
            parse_int("18446744073709551615", IntType::U64),
            Ok(u64::MAX as i128)
        );
        assert_eq!(
            parse_int("1.8446744073709551615e19", IntType::U64),
            Ok(u64::MAX as i128)
        );
        assert_eq!(
            parse_int("-9223372036854775808", IntType::I64),
            Ok(i64::MIN as i128)
        );
        assert_eq!(parse_int("2147483647", IntType::I32), Ok(i32::MAX as i128));
    }

    #[test]
    fn integers_reject_bad_input() {
        for (t, ty) in [
            ("1.5", IntType::I64),
            ("1e-1", IntType::I64),
            ("18446744073709551616", IntType::U64),
            ("9223372036854775808", IntType::I64),
            ("-1", IntType::U64),
            ("-1", IntType::U32),
            ("4294967296", IntType::U32),
            ("2147483648", IntType::I32),
            ("1e99999999999999", IntType::I64),
            ("1e40", IntType::U64),
            ("", IntType::I64),
            ("-", IntType::I64),
            ("+1", IntType::I64),
            (" 1", IntType::I64),
            ("1 ", IntType::I64),
            ("0x10", IntType::I64),
            ("1e", IntType::I64),
            (".", IntType::I64),
            ("abc", IntType::I64),
            ("NaN", IntType::I64),
        ] {
            assert!(parse_int(t, ty).is_err(), "{t:?} as {ty:?}");
        }
        assert!(
            parse_int("-1", IntType::U64)
                .unwrap_err()
                .contains("negative")
        );
        assert!(
            parse_int("1.5", IntType::U64)
                .unwrap_err()
                .contains("fractional")
        );
    }

    #[test]
    fn doubles() {
        assert_eq!(parse_double("1.5", false), Ok(1.5));
        assert_eq!(parse_double("1.5", true), Ok(1.5));
        assert!(parse_double("NaN", true).unwrap().is_nan());
        assert_eq!(parse_double("Infinity", true), Ok(f64::INFINITY));
        assert_eq!(parse_double("-Infinity", true), Ok(f64::NEG_INFINITY));
        assert!(parse_double("1e400", false).is_err());
        assert!(parse_double("inf", true).is_err());
        assert!(parse_double(" 1", true).is_err());
        assert!(parse_double("01", true).is_err());
        assert!(parse_double("-0.0", false).unwrap().is_sign_negative());
    }

    #[test]
    fn formatting() {
        let mut out = Vec::new();
        write_u64(&mut out, 0);
        out.push(b' ');
        write_u64(&mut out, u64::MAX);
        out.push(b' ');
        write_i64(&mut out, i64::MIN);
        out.push(b' ');
        write_f64(&mut out, f64::NAN);
        write_f64(&mut out, f64::NEG_INFINITY);
        out.push(b' ');
        write_f64(&mut out, 0.1);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "0 18446744073709551615 -9223372036854775808 \"NaN\"\"-Infinity\" 0.1"
        );
    }
}
