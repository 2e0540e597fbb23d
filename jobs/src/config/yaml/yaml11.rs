//! YAML for readers of YAML 1.1 too (PyYAML, and the many tools built on it): a plain scalar they
//! take for something other than the string it is (`8:00` is the number 480 there, `on` is true,
//! `1_000` is 1000, `2024-01-01` a date) is quoted, so every reader sees the same strings. YAML
//! 1.2 readers (ours) read plain and quoted alike.

/// `text`, YAML as it is emitted here (block style, one scalar a line, no folded plain scalar),
/// with every plain key and value a YAML 1.1 reader misreads ([`misread`]) single-quoted; the
/// lines of a block scalar (`|`) are left alone.
pub(super) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    // The column a block scalar's lines are deeper than, while in one.
    let mut block: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let indent = body.len() - body.trim_start_matches(' ').len();
        if block.is_some_and(|col| body.trim().is_empty() || indent > col) {
            out.push_str(line);
            continue;
        }
        let (fixed, opens) = quote_line(body);
        block = opens;
        out.push_str(&fixed);
        if line.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// One line, its plain key and value quoted where misread; and the column a block scalar it
/// opens (`key: |`) is deeper than.
fn quote_line(line: &str) -> (String, Option<usize>) {
    let mut col = line.len() - line.trim_start_matches(' ').len();
    let mut out = line[..col].to_owned();
    let mut rest = &line[col..];
    let mut parent = col;
    while let Some(r) = rest.strip_prefix("- ") {
        out.push_str("- ");
        parent = col;
        col += 2;
        rest = r;
    }
    let (key, value) = match split_key(rest) {
        Some((k, v)) => {
            parent = col;
            (Some(k), v)
        }
        None => (None, rest),
    };
    if let Some(k) = key {
        out.push_str(&plain(k));
        out.push(':');
        if !value.is_empty() {
            out.push(' ');
        }
    }
    out.push_str(&plain(value));
    let opens = value.starts_with(['|', '>']).then_some(parent);
    (out, opens)
}

/// `rest` as `key: value` (or `key:` before a nested block): the key as written and the value,
/// or `None` when it is a lone scalar. A plain scalar here never holds `: ` (the emitter quotes
/// one that does), so the first one outside quotes ends the key.
fn split_key(rest: &str) -> Option<(&str, &str)> {
    let end = match rest.chars().next()? {
        '\'' => closing(rest, '\'')?,
        '"' => closing(rest, '"')?,
        _ => 0,
    };
    let tail = &rest[end..];
    if let Some(i) = tail.find(": ") {
        return Some((&rest[..end + i], &tail[i + 2..]));
    }
    tail.strip_suffix(':').map(|_| (&rest[..rest.len() - 1], ""))
}

/// The byte after the quoted scalar that `s` starts with (`''` in single quotes and `\"` in
/// double quotes are escapes).
fn closing(s: &str, q: char) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'\\' if q == '"' => i += 2,
            b'\'' if q == '\'' && b.get(i + 1) == Some(&b'\'') => i += 2,
            c if c == q as u8 => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// A scalar as written, single-quoted when it is a plain string (as YAML 1.2 reads it: a plain
/// `true` or `86400` the emitter wrote is a boolean or a number, read alike by both) that a YAML
/// 1.1 reader misreads.
fn plain(s: &str) -> String {
    let written_as_is = s.starts_with(['\'', '"', '|', '>', '[', '{', '&', '*', '!']);
    let string = || matches!(yaml_serde::from_str(s), Ok(yaml_serde::Value::String(_)));
    match !written_as_is && misread(s) && string() {
        true => format!("'{}'", s.replace('\'', "''")),
        false => s.to_owned(),
    }
}

/// True when YAML 1.1 reads plain `s` as something other than a string: a boolean (`yes`,
/// `off`, `y`), null (`~`), a number of its forms (`1_000`, `0b1`, `0x1F`, `017`, `.5`,
/// `8:00` and `1:30:00` in base 60, `.inf`), a date (`2024-01-01`), or a merge key (`<<`).
/// Some strings are quoted that a reader would take as strings (`08`, `1:99`): quoting costs
/// nothing.
pub(super) fn misread(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false", "False",
        "FALSE", "on", "On", "ON", "off", "Off", "OFF", "~", "null", "Null", "NULL", "<<", "=", ".inf",
        ".Inf", ".INF", ".nan", ".NaN", ".NAN",
    ];
    if s.is_empty() || WORDS.contains(&s) {
        return true;
    }
    let digits = |t: &str| t.len() >= 6 && t.as_bytes()[..4].iter().all(u8::is_ascii_digit);
    if digits(s) && s.as_bytes()[4] == b'-' && s.as_bytes()[5].is_ascii_digit() {
        return true; // a date, or a date and time
    }
    let n = s.strip_prefix(['-', '+']).unwrap_or(s);
    if matches!(n, ".inf" | ".Inf" | ".INF") {
        return true;
    }
    if let Some(h) = n.strip_prefix("0x") {
        return !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit() || c == '_');
    }
    if let Some(b) = n.strip_prefix("0b") {
        return !b.is_empty() && b.chars().all(|c| matches!(c, '0' | '1' | '_'));
    }
    // Decimal, octal, base 60 and floats: digits, `_`, `:` and one `.`, then an exponent.
    let (mantissa, exponent) = match n.find(['e', 'E']) {
        Some(i) => (&n[..i], Some(&n[i + 1..])),
        None => (n, None),
    };
    let mantissa_ok = mantissa.chars().any(|c| c.is_ascii_digit())
        && mantissa.chars().all(|c| c.is_ascii_digit() || matches!(c, '_' | ':' | '.'))
        && mantissa.matches('.').count() <= 1
        && mantissa.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}
