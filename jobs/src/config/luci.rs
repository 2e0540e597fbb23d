//! LUCI's `vms.cfg` (a `Configs` text proto of LUCI `config.proto`, luci-gce.md §2.1–2.2): each
//! `vms { … }` block read as a Config, with the lines of its fields for errors; and the way back
//! ([`to_text_proto`]). A LUCI field this service cannot honour is an error naming it and its
//! line, never dropped; every mistake of a file is found in one pass ([`read_vms`]).

use std::collections::HashMap;
use std::ops::Range;

use super::spec::{Config, MAX_FILE_CONFIGS};
use super::textproto::{self, Value};
use super::units::{ConfigError, ConfigErrors};

mod fields;
mod write;
pub use write::to_text_proto;

/// Where a Config of a `vms.cfg` came from: its block's line and its fields' lines, and what
/// could not be read in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The line of its `vms` block.
    pub line: u32,
    /// Its block's bytes in the file.
    pub span: Range<usize>,
    /// Field paths as validation names them (`attributes.disk[0].type`) and their lines.
    lines: Vec<(String, u32)>,
    /// The mistakes of its block (placed), by line.
    mistakes: Vec<(u32, ConfigError)>,
    /// The paths of the fields that could not be read (left at their default).
    unread: Vec<String>,
    /// Durations as written (`1d`), by path (`lifetime`, `amount.change[0].length`).
    durations: Vec<(String, String)>,
}

/// `field` (as validation names it: `linux.attributes.zone`, `<unnamed>.zone`) without the
/// Config's prefix: `attributes.zone`.
pub(super) fn relative<'a>(prefix: &str, field: &'a str) -> &'a str {
    let named = if prefix.is_empty() { "<unnamed>" } else { prefix };
    field.strip_prefix(named).and_then(|f| f.strip_prefix('.')).unwrap_or(field)
}

/// True when field path `a` holds `b` or `b` holds `a` (`disk[0]` and `disk[0].size`): a rule
/// about one says nothing new once the other could not be read.
pub(super) fn related(a: &str, b: &str) -> bool {
    let within = |x: &str, y: &str| {
        x == y || x.strip_prefix(y).is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    within(a, b) || within(b, a)
}

impl Located {
    /// The line of a field its validation names (`linux.attributes.zone`): the deepest field
    /// written that holds it, or the block's line.
    pub fn line_of(&self, prefix: &str, field: &str) -> u32 {
        let path = relative(prefix, field);
        let within =
            |p: &str| path == p || path.starts_with(&format!("{p}.")) || path.starts_with(&format!("{p}["));
        self.lines
            .iter()
            .filter(|(p, _)| within(p))
            .max_by_key(|(p, _)| p.len())
            .map_or(self.line, |(_, l)| *l)
    }

    /// The error of a prefix written in this block and in the one at line `first`.
    pub fn twice(&self, origin: &str, prefix: &str, first: u32) -> ConfigError {
        ConfigError {
            field: format!("{origin}:{}", self.line),
            rule: format!("{}: prefix also in the vms block at line {first}", block(prefix, self.line)),
        }
    }

    /// `e` (about the Config of prefix `prefix`) with the block and the field's line.
    pub fn explain(&self, origin: &str, prefix: &str, e: ConfigError) -> ConfigError {
        let line = self.line_of(prefix, &e.field);
        ConfigError { field: format!("{origin}:{line}"), rule: format!("{}: {e}", block(prefix, self.line)) }
    }

    /// The mistakes found reading its block (empty: it was read whole).
    pub fn mistakes(&self) -> impl Iterator<Item = &ConfigError> {
        self.mistakes.iter().map(|(_, e)| e)
    }

    /// Its durations as the block wrote them (`duration: "1d"`), by path (`lifetime`,
    /// `amount.change[0].length`); one written `seconds: N` is not among them.
    pub fn durations(&self) -> &[(String, String)] {
        &self.durations
    }

    /// Every mistake of its Config, placed and in the order of the text: those found reading its
    /// block, then `first` (found since, e.g. a `from_file` that cannot be read), then each of
    /// `then` (the rules it breaks) that is not about a field already found wrong.
    pub fn explain_all(
        &self,
        origin: &str,
        prefix: &str,
        first: Vec<ConfigError>,
        then: Vec<ConfigError>,
    ) -> Vec<ConfigError> {
        let mut unread: Vec<&str> = self.unread.iter().map(String::as_str).collect();
        unread.extend(first.iter().map(|e| relative(prefix, &e.field)));
        let fresh = |e: &ConfigError| !unread.iter().any(|u| related(u, relative(prefix, &e.field)));
        let then: Vec<ConfigError> = then.into_iter().filter(fresh).collect();
        let mut out = self.mistakes.clone();
        for e in first.into_iter().chain(then) {
            out.push((self.line_of(prefix, &e.field), self.explain(origin, prefix, e)));
        }
        out.sort_by_key(|(line, _)| *line);
        out.into_iter().map(|(_, e)| e).collect()
    }
}

fn block(prefix: &str, line: u32) -> String {
    match prefix.is_empty() {
        true => format!("vms block at line {line}"),
        false => format!("vms block {prefix:?} (line {line})"),
    }
}

/// Reads every `vms` block of a `vms.cfg` text, each as far as it can be read: the mistakes of a
/// block (a field that cannot be read or is refused, a prefix an earlier block has) stay with it
/// ([`Located::mistakes`]), for its caller to say with the rules its Config breaks. Refused
/// whole, with every mistake found (the blocks' too): a text that is not protobuf text, a field
/// that is no `vms` block, no block at all, or over [`MAX_FILE_CONFIGS`] of them. Errors name
/// `origin`, the line, and the block.
pub fn read_vms(text: &str, origin: &str) -> Result<Vec<(Config, Located)>, ConfigErrors> {
    let at = |line: u32, rule: String| ConfigError { field: format!("{origin}:{line}"), rule };
    let fields = textproto::parse(text).map_err(|e| at(e.line, e.what))?;
    if fields.len() > MAX_FILE_CONFIGS {
        let rule = format!("holds {} blocks; at most {MAX_FILE_CONFIGS} Configs a file", fields.len());
        return Err(at(1, rule).into());
    }
    if fields.is_empty() {
        return Err(at(1, "holds no vms block: a Config file needs at least one".into()).into());
    }
    let mut file: Vec<(u32, ConfigError)> = Vec::new();
    let mut out: Vec<(Config, Located)> = Vec::new();
    let mut first = HashMap::<String, u32>::new();
    for f in &fields {
        if f.name != "vms" {
            let rule = format!("{} is not a field of LUCI's Configs (only vms blocks are)", f.name);
            file.push((f.line, at(f.line, rule)));
            continue;
        }
        let Value::Msg(body) = &f.value else {
            file.push((f.line, at(f.line, "vms must be a message: vms { … }".into())));
            continue;
        };
        let (c, found) = fields::block(body, f.line);
        let mut located = Located {
            line: f.line,
            span: f.span.clone(),
            lines: found.lines,
            mistakes: Vec::new(),
            unread: found.unread,
            durations: found.durations,
        };
        for b in found.bad {
            let rule = format!("{}: {}: {}", block(&c.prefix, f.line), b.path, b.rule);
            located.mistakes.push((b.line, at(b.line, rule)));
            located.unread.push(b.path);
        }
        if !c.prefix.is_empty() {
            match first.get(&c.prefix) {
                Some(&was) => located.mistakes.push((f.line, located.twice(origin, &c.prefix, was))),
                None => {
                    first.insert(c.prefix.clone(), f.line);
                }
            }
        }
        located.mistakes.sort_by_key(|(line, _)| *line);
        out.push((c, located));
    }
    if !file.is_empty() {
        file.extend(out.iter().flat_map(|(_, at)| at.mistakes.iter().cloned()));
        file.sort_by_key(|(line, _)| *line);
        ConfigErrors::check(file.into_iter().map(|(_, e)| e).collect())?;
    }
    Ok(out)
}

/// [`read_vms`], refusing any mistake: every block read whole (the rules of its Config are the
/// caller's to check).
pub fn parse_vms(text: &str, origin: &str) -> Result<Vec<(Config, Located)>, ConfigErrors> {
    let all = read_vms(text, origin)?;
    ConfigErrors::check(all.iter().flat_map(|(_, at)| at.mistakes().cloned()).collect())?;
    Ok(all)
}

#[cfg(test)]
pub(crate) mod tests;
