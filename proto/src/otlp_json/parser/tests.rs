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
