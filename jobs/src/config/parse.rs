//! Reading a Config's text: the nesting bound checked before a parser sees it, the parse, every
//! mistake of a document named at once, and no value of the file quoted in an error.

use super::spec::{Config, MAX_NESTING};
use super::units::{ConfigError, err};

/// A parser's message without the values it quotes (`invalid type: string "…"`): an error
/// names where and why, never what a file holds.
fn redact(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut quoted = false;
    for c in message.chars() {
        match (c, quoted) {
            ('"', false) => {
                out.push_str("\"…");
                quoted = true;
            }
            ('"', true) => {
                out.push('"');
                quoted = false;
            }
            (_, true) => {}
            (c, false) => out.push(c),
        }
    }
    out
}

/// At most this many mistakes of one document are named.
const MAX_MISTAKES: usize = 20;

/// Every mistake of a document that does not parse, `first` (with its line) leading: the
/// document is read as YAML values, and each field that does not fit is named by its path and
/// left out to find the next, up to [`MAX_MISTAKES`]. A document that is not YAML at all has
/// just the one.
fn mistakes(text: &str, first: &serde_yaml::Error) -> String {
    let mut out = vec![redact(&first.to_string())];
    let Ok(mut doc) = serde_yaml::from_str::<serde_yaml::Value>(text) else { return out.remove(0) };
    let mut seen = Vec::new();
    while seen.len() < MAX_MISTAKES {
        let Err(e) = serde_path_to_error::deserialize::<_, Config>(doc.clone()) else { break };
        let path: Vec<Segment> = e.path().iter().map(Segment::of).collect();
        let named = format!("{}: {}", e.path(), redact(&e.inner().to_string()));
        // The first mistake is already named, with its line; the others by their path.
        if !seen.is_empty() {
            out.push(named);
        }
        seen.push(path.clone());
        if path.is_empty() || !remove(&mut doc, &path) {
            break;
        }
    }
    match out.len() {
        1 => out.remove(0),
        n => format!("{n} mistakes: {}", out.join("; ")),
    }
}

/// One step of a path into a YAML value.
#[derive(Debug, Clone)]
enum Segment {
    Key(String),
    Index(usize),
    Other,
}

impl Segment {
    fn of(s: &serde_path_to_error::Segment) -> Self {
        match s {
            serde_path_to_error::Segment::Map { key } => Segment::Key(key.clone()),
            serde_path_to_error::Segment::Seq { index } => Segment::Index(*index),
            _ => Segment::Other,
        }
    }
}

/// Removes the value at `path` from `doc`; false when there is none to remove.
fn remove(doc: &mut serde_yaml::Value, path: &[Segment]) -> bool {
    let Some((last, parents)) = path.split_last() else { return false };
    let mut at = doc;
    for s in parents {
        let next = match (s, at) {
            (Segment::Key(k), serde_yaml::Value::Mapping(m)) => m.get_mut(k.as_str()),
            (Segment::Index(i), serde_yaml::Value::Sequence(v)) => v.get_mut(*i),
            _ => None,
        };
        let Some(next) = next else { return false };
        at = next;
    }
    match (last, at) {
        (Segment::Key(k), serde_yaml::Value::Mapping(m)) => m.remove(k.as_str()).is_some(),
        (Segment::Index(i), serde_yaml::Value::Sequence(v)) if *i < v.len() => {
            v.remove(*i);
            true
        }
        _ => false,
    }
}

/// Checks the depth of `[`/`{` nesting outside quoted strings, before a parser sees the text
/// (parsing deep nesting costs more than linear time).
pub fn check_nesting(text: &str, origin: &str) -> Result<(), ConfigError> {
    let (mut depth, mut quote, mut escaped, mut comment) = (0usize, None::<char>, false, false);
    let mut prev = '\n';
    for c in text.chars() {
        if comment {
            comment = c != '\n';
        } else if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
        } else {
            // A quote opens a string only where a value starts (`it's` is no string); `#` after
            // a space starts a comment.
            let at_start = prev.is_whitespace() || matches!(prev, ':' | '[' | '{' | ',' | '-');
            match c {
                '"' | '\'' if at_start => quote = Some(c),
                '#' if prev.is_whitespace() => comment = true,
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(err(origin, format!("nests [ and {{ deeper than {MAX_NESTING} levels")));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        prev = c;
    }
    Ok(())
}

impl Config {
    /// Parses a YAML (or JSON, a subset of YAML) document; unknown fields are errors, and every
    /// mistake of the document is named at once ([`mistakes`]).
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let c: Config = match serde_yaml::from_str(text) {
            Ok(c) => c,
            Err(first) => return Err(err(origin, format!("cannot parse: {}", mistakes(text, &first)))),
        };
        if c == Config::default() {
            return Err(err(origin, "is empty (no field is set): a Config file needs at least a prefix"));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests;
