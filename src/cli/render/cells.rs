//! The cells every table is made of: aligned columns, a value as a cell, text cut short, an
//! error's resolved mark, a time to the second and seconds in their largest whole unit.

use serde_json::Value;

/// Aligned columns under a header.
pub(super) fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| (*h).to_owned()).collect());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

/// A cell: `-` for nothing (null or empty), a string as it is, anything else as JSON.
pub(super) fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) if s.is_empty() => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` cut to `n` characters, with `…` where it was cut.
pub(super) fn short(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_owned();
    }
    text.chars().take(n - 1).chain(['…']).collect()
}

/// An error's mark once it is resolved (`, resolved <when>`: its stage succeeded again since),
/// else nothing.
pub(super) fn resolved(e: &Value) -> String {
    match e["resolved"].is_null() {
        true => String::new(),
        false => format!(", resolved {}", when(&e["resolved"])),
    }
}

/// A time to the second (`2026-11-27T00:11:52Z`): a table has no use for nanoseconds.
pub(super) fn when(v: &Value) -> String {
    match v.as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()) {
        Some(t) => t.with_timezone(&chrono::Utc).format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        None => s(v),
    }
}

/// Seconds as `90s`, `10m`, `2h` (the largest whole unit).
pub(super) fn secs(v: &Value) -> String {
    match v.as_u64() {
        Some(n) if n > 0 && n % 3600 == 0 => format!("{}h", n / 3600),
        Some(n) if n > 0 && n % 60 == 0 => format!("{}m", n / 60),
        Some(n) => format!("{n}s"),
        None => s(v),
    }
}
