//! Config files as YAML (or JSON) text: read (nesting checked first, a Config per document,
//! errors without the values they quote) and written (a document per Config, read the same by
//! YAML 1.1 and 1.2 readers).

use super::mistakes::mistakes;
use super::spec::*;
use super::units::*;

/// Drops the map entries that hold an empty default, at any depth (a list keeps its items).
fn tidy(v: &mut yaml_serde::Value) {
    use yaml_serde::Value as V;
    match v {
        V::Mapping(m) => {
            m.retain(|k, v| {
                tidy(v);
                // Fields a reader requires stay, whatever they hold.
                if k.as_str()
                    .is_some_and(|k| ["email", "key", "operator", "time", "zone", "day"].contains(&k))
                {
                    return true;
                }
                let empty_labels =
                    k.as_str() == Some("label") && v.as_mapping().is_some_and(|m| m.is_empty());
                let empty = match v {
                    V::Null => true,
                    V::Bool(b) => !*b,
                    V::String(s) => s.is_empty(),
                    V::Sequence(s) => s.is_empty(),
                    _ => false,
                };
                !(empty || empty_labels)
            });
        }
        V::Sequence(s) => s.iter_mut().for_each(tidy),
        _ => {}
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
    /// Parses a YAML (or JSON, a subset of YAML) document; unknown fields are errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let mut all = Self::parse_all(text, origin)?;
        match all.len() {
            1 => Ok(all.remove(0)),
            n => Err(err(origin, format!("holds {n} YAML documents; one Config is read here"))),
        }
    }

    /// Parses every document of a YAML text (`---` between them), a Config each, once its
    /// nesting is checked ([`check_nesting`]); unknown fields
    /// are errors, and so is an empty document; every mistake of the first document that has
    /// any is named at once.
    pub fn parse_all(text: &str, origin: &str) -> Result<Vec<Self>, ConfigError> {
        use serde::Deserialize as _;
        check_nesting(text, origin)?;
        let mut out = Vec::new();
        for (i, doc) in yaml_serde::Deserializer::from_str(text).enumerate() {
            if i == MAX_FILE_CONFIGS {
                return Err(err(
                    origin,
                    format!(
                        "holds over {MAX_FILE_CONFIGS} documents; at most {MAX_FILE_CONFIGS} Configs a file"
                    ),
                ));
            }
            let which = if i == 0 { String::new() } else { format!("document {}: ", i + 1) };
            let c = crate::unknown::strictly(|| Config::deserialize(doc)).map_err(|e| {
                // Read again as plain YAML, the document names every mistake it has.
                let value = yaml_serde::Deserializer::from_str(text)
                    .nth(i)
                    .and_then(|d| yaml_serde::Value::deserialize(d).ok());
                err(origin, format!("{which}cannot parse: {}", mistakes(value, &e.to_string(), text)))
            })?;
            if c == Config::default() {
                return Err(err(
                    origin,
                    format!("{which}is empty (no field is set): a Config file needs at least a prefix"),
                ));
            }
            out.push(c);
        }
        if out.is_empty() {
            return Err(err(origin, "is empty (no field is set): a Config file needs at least a prefix"));
        }
        Ok(out)
    }

    /// `configs` as YAML, one document each (`---` between them), as [`Config::parse_all`]
    /// reads them; fields left at their empty default (`""`, `false`, `null`, `[]`, no labels)
    /// are left out, and a string a YAML 1.1 reader would take for something else (`8:00`) is
    /// quoted (`documents`).
    pub fn to_yaml_all(configs: &[Config]) -> Result<String, ConfigError> {
        let docs: Vec<yaml_serde::Value> =
            configs.iter().map(Config::to_yaml_value).collect::<Result<_, _>>()?;
        documents(&docs)
    }

    /// This Config as a YAML value, fields left at their empty default left out (see
    /// [`Config::to_yaml_all`]).
    pub fn to_yaml_value(&self) -> Result<yaml_serde::Value, ConfigError> {
        let mut v =
            yaml_serde::to_value(self).map_err(|e| err(&self.prefix, format!("cannot write YAML: {e}")))?;
        tidy(&mut v);
        Ok(v)
    }
}

/// YAML documents (`---` between them), written so that a YAML 1.1 reader (PyYAML) reads the
/// same values as a YAML 1.2 one: a string it would take for a number, a boolean or a date
/// (`8:00`, `yes`, `1_000`, `2024-01-01`) is quoted (`yaml11::quote`); each document is read
/// back and must be the value written.
pub(super) fn documents(docs: &[yaml_serde::Value]) -> Result<String, ConfigError> {
    let mut out = Vec::new();
    for (i, v) in docs.iter().enumerate() {
        let fail = |e: String| err(format!("document {}", i + 1), format!("cannot write YAML: {e}"));
        let text = yaml11::quote(&yaml_serde::to_string(v).map_err(|e| fail(e.to_string()))?);
        let back: yaml_serde::Value = yaml_serde::from_str(&text).map_err(|e| fail(e.to_string()))?;
        if back != *v {
            return Err(fail("the text written does not read back as the value".into()));
        }
        out.push(text);
    }
    Ok(out.join("---\n"))
}

mod yaml11;

#[cfg(test)]
mod tests;
