//! Unit tests of the text format reader: its grammar's corners, and bad and hostile input.

use super::*;

fn one(text: &str) -> Value {
    let mut f = parse(text).unwrap();
    assert_eq!(f.len(), 1, "{f:?}");
    f.remove(0).value
}

fn msg(v: &Value) -> &[Field] {
    match v {
        Value::Msg(m) => m,
        other => panic!("not a message: {other:?}"),
    }
}

#[test]
fn comments_separators_and_both_message_delimiters() {
    let text = "# head\na { b: 1, c: 'x'; } # tail\nd < e: E >\nf: true\n";
    let f = parse(text).unwrap();
    let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["a", "d", "f"]);
    assert_eq!(f.iter().map(|f| f.line).collect::<Vec<_>>(), [2, 3, 4]);
    let a = msg(&f[0].value);
    assert_eq!(a[0].value, Value::Num("1".into()));
    assert_eq!(a[1].value, Value::Str("x".into()));
    assert_eq!(msg(&f[1].value)[0].value, Value::Ident("E".into()));
    assert_eq!(f[2].value, Value::Ident("true".into()));
    // The colon before a message is optional; a # inside a string is no comment.
    assert_eq!(
        one("a: { b: \"#x\" }"),
        Value::Msg(vec![Field { name: "b".into(), line: 1, value: Value::Str("#x".into()), span: 5..13 }])
    );
}

#[test]
fn strings_escape_and_concatenate() {
    assert_eq!(one(r#"s: "a\"b" 'c\'d' "\n\t\\""#), Value::Str("a\"bc'd\n\t\\".into()));
    assert_eq!(one(r#"s: "\101\x42\u00e9\U0001F600""#), Value::Str("ABé😀".into()));
    assert_eq!(one("s: \"one \"\n   \"two\""), Value::Str("one two".into()));
    assert_eq!(one("s: 'say \"hi\"'"), Value::Str("say \"hi\"".into()));
}

#[test]
fn repeated_fields_and_lists_repeat() {
    let f = parse("tag: \"a\"\ntag: \"b\"\ntag: [\"c\", \"d\"]\nm: [{x: 1}, <x: 2>]\nempty: []").unwrap();
    let tags: Vec<&Value> = f.iter().filter(|f| f.name == "tag").map(|f| &f.value).collect();
    assert_eq!(tags.len(), 4);
    assert_eq!(tags[3], &Value::Str("d".into()));
    assert_eq!(f.iter().filter(|f| f.name == "m").count(), 2);
    assert!(!f.iter().any(|f| f.name == "empty"));
}

#[test]
fn nested_messages_keep_their_lines_and_spans() {
    let text = "vms {\n  a {\n    b {\n      c: -5\n    }\n  }\n}\n";
    let f = parse(text).unwrap();
    assert_eq!(&text[f[0].span.clone()], text.trim_end());
    let b = &msg(&msg(&f[0].value)[0].value)[0];
    assert_eq!((b.name.as_str(), b.line), ("b", 3));
    assert_eq!(msg(&b.value)[0].value, Value::Num("-5".into()));
}

#[test]
fn bad_input_names_its_line_and_never_quotes_the_text() {
    let cases = [
        ("a: 1\nb {\n  c: 2\n", 4, "ends before the closing }"),
        ("a: 1\n\nb: \"secret-value\n", 3, "not closed"),
        ("a: 1\n}\n", 2, "closes nothing"),
        ("a {\n  b: 1 >\n}", 2, "closes nothing"),
        ("a: 1\nb c\n", 2, "expected : or {"),
        ("a:\n", 2, "expected a value"),
        ("a: 1\n:: x", 2, "expected a field name"),
        ("s: \"\\q secret\"", 1, "unknown escape"),
        ("s: \"\\777\"", 1, "octal"),
        ("s: \"\\xff\"", 1, "not UTF-8"),
        ("s: \"\\uD800\"", 1, "\\u needs 4 hex digits"),
        ("[ext.field]: 1", 1, "extension"),
        ("l: [1, 2", 1, "expected , or ]"),
    ];
    for (text, line, what) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(e.what.contains(what), "{text:?}: {e}");
        assert!(!e.to_string().contains("secret"), "{e}");
    }
}

#[test]
fn huge_nesting_is_refused_without_overflowing_the_stack() {
    for open in ["a {", "a <", "a: {"] {
        let deep = open.repeat(1_000_000);
        let e = parse(&deep).unwrap_err();
        assert!(e.what.contains("deeper than"), "{e}");
    }
    let ok = format!("{}{}", "a {".repeat(MAX_NESTING), "}".repeat(MAX_NESTING));
    parse(&ok).unwrap();
    let list = format!("a: [{}", "{ b: [".repeat(100_000));
    assert!(parse(&list).unwrap_err().what.contains("deeper than"));
}

#[test]
fn quote_writes_what_parse_reads() {
    for s in ["plain", "a\"b\\c", "line\nbreak\ttab", "é😀", "#not-a-comment", ""] {
        assert_eq!(one(&format!("s: {}", quote(s))), Value::Str(s.into()), "{s:?}");
    }
}
