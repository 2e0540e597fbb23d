//! What a parser says about a Config's text, made safe and complete: no value of the file
//! quoted, and every mistake of a document named at once.

use super::spec::Config;

/// A parser's message without the values it quotes (`invalid type: string "…"`): an error
/// names where and why, never what a file holds.
pub(super) fn redact(message: &str) -> String {
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

/// Every mistake of a document that does not parse as a Config, `first` (the parser's own
/// message, with its line) leading: the document, read as YAML values (`doc`; none when it is
/// not YAML at all), gives the others: each field that does not fit is named by its path and
/// left out to find the next, up to [`MAX_MISTAKES`].
pub(super) fn mistakes(doc: Option<yaml_serde::Value>, first: &str) -> String {
    let mut out = vec![redact(first)];
    let Some(mut doc) = doc else { return out.remove(0) };
    for found in 0..MAX_MISTAKES {
        let Err(e) = serde_path_to_error::deserialize::<_, Config>(doc.clone()) else { break };
        // The first mistake is already named, with its line; the others by their path.
        if found > 0 {
            out.push(format!("{}: {}", e.path(), redact(&e.inner().to_string())));
        }
        let path: Vec<Segment> = e.path().iter().map(Segment::of).collect();
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
fn remove(doc: &mut yaml_serde::Value, path: &[Segment]) -> bool {
    let Some((last, parents)) = path.split_last() else { return false };
    let mut at = doc;
    for s in parents {
        let next = match (s, at) {
            (Segment::Key(k), yaml_serde::Value::Mapping(m)) => m.get_mut(k.as_str()),
            (Segment::Index(i), yaml_serde::Value::Sequence(v)) => v.get_mut(*i),
            _ => None,
        };
        let Some(next) = next else { return false };
        at = next;
    }
    match (last, at) {
        (Segment::Key(k), yaml_serde::Value::Mapping(m)) => m.remove(k.as_str()).is_some(),
        (Segment::Index(i), yaml_serde::Value::Sequence(v)) if *i < v.len() => {
            v.remove(*i);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
