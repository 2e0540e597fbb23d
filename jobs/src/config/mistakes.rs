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
/// left out to find the next, up to [`MAX_MISTAKES`]. `text` is the file's text, where an unknown
/// field's line is looked up (the parser meets one where its mapping ends, not at its key).
pub(super) fn mistakes(doc: Option<yaml_serde::Value>, first: &str, text: &str) -> String {
    let mut out = vec![redact(first)];
    let Some(mut doc) = doc else { return out.remove(0) };
    for found in 0..MAX_MISTAKES {
        let read = crate::unknown::strictly(|| serde_path_to_error::deserialize::<_, Config>(doc.clone()));
        let Err(e) = read else { break };
        let mut path: Vec<Segment> = e.path().iter().map(Segment::of).collect();
        let message = e.inner().to_string();
        match crate::unknown::unknown_field_named(&message) {
            // An unknown field: named by its full path, with the fields its place knows, and
            // (the first mistake) its line.
            Some(name) => {
                let said = unknown_field(&path, name);
                path.push(Segment::Key(name.to_owned()));
                let at = if found == 0 { line_of(text, name) } else { String::new() };
                if found == 0 {
                    out.clear();
                }
                let whole = match e.path().to_string() {
                    root if root == "." => name.to_owned(),
                    parent => format!("{parent}.{name}"),
                };
                out.push(format!("{whole}: {said}{at}"));
            }
            // The first mistake is already named, with its line; the others by their path.
            None if found > 0 => out.push(format!("{}: {}", e.path(), redact(&message))),
            None => {}
        }
        if path.is_empty() || !remove(&mut doc, &path) {
            break;
        }
    }
    match out.len() {
        1 => out.remove(0),
        n => format!("{n} mistakes: {}", out.join("; ")),
    }
}

/// `unknown field `name`, expected one of …`: the fields a Config has at `path` (its schema says
/// which), as a parser refusing unknown fields says.
fn unknown_field(path: &[Segment], name: &str) -> String {
    let schema = schemars::schema_for!(Config);
    let root = schema.as_value();
    fn resolve<'a>(root: &'a serde_json::Value, mut node: &'a serde_json::Value) -> &'a serde_json::Value {
        for _ in 0..8 {
            if let Some(def) = node["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
                node = &root["$defs"][def];
            } else if let Some(branch) =
                node["anyOf"].as_array().and_then(|b| b.iter().find(|b| b["type"] != "null"))
            {
                node = branch;
            } else {
                break;
            }
        }
        node
    }
    let mut node = resolve(root, root);
    for s in path {
        node = resolve(
            root,
            match s {
                Segment::Key(k) => &node["properties"][k.as_str()],
                Segment::Index(_) => &node["items"],
                Segment::Other => &serde_json::Value::Null,
            },
        );
    }
    match node["properties"].as_object() {
        Some(fields) if !fields.is_empty() => {
            let names: Vec<String> = fields.keys().map(|k| format!("`{k}`")).collect();
            format!("unknown field `{name}`, expected one of {}", names.join(", "))
        }
        _ => format!("unknown field `{name}`"),
    }
}

/// ` at line N`: the one line of `text` where `name` is a key (YAML `name:` or JSON `"name":`),
/// or nothing when it is not exactly one.
fn line_of(text: &str, name: &str) -> String {
    let is_key = |line: &str| {
        let l = line.trim_start().trim_start_matches("- ").trim_start_matches(['{', ',', ' ']);
        [name.to_owned(), format!("\"{name}\""), format!("'{name}'")]
            .iter()
            .any(|k| l.strip_prefix(k.as_str()).is_some_and(|rest| rest.trim_start().starts_with(':')))
    };
    let lines: Vec<usize> = text.lines().enumerate().filter(|(_, l)| is_key(l)).map(|(i, _)| i + 1).collect();
    match lines[..] {
        [n] => format!(" at line {n}"),
        _ => String::new(),
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
