//! Swarming dimensions: a task's requirements and a bot's values, as maps from a key to values,
//! read from JSON (a value is a string, a list, or `"a|b"` alternatives), and how they match
//! (a task's every key needs one of its values among the bot's; Swarming's subset match).

use std::collections::BTreeMap;

use serde_json::Value;

/// Dimensions: each key with its values (a task: alternatives, any one suffices; a bot: every
/// value it has).
pub type Dims = BTreeMap<String, Vec<String>>;

/// Longest dimension key Swarming accepts.
const MAX_KEY: usize = 64;
/// Longest dimension value Swarming accepts (bytes).
const MAX_VALUE: usize = 256;

/// True for a key Swarming accepts: `^[a-zA-Z\-_.][0-9a-zA-Z\-_.]*$`, at most 64 long.
pub fn valid_key(k: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    !k.is_empty() && k.len() <= MAX_KEY && k.chars().all(ok) && !k.starts_with(|c: char| c.is_ascii_digit())
}

/// Dimensions from a JSON object `{key: "v" | "a|b" | ["a", "b|c"]}`; `what` names it in errors.
pub fn parse(v: &Value, what: &str) -> Result<Dims, String> {
    let obj = v.as_object().ok_or_else(|| format!("{what}: expected an object of key to values"))?;
    let mut out = Dims::new();
    for (k, val) in obj {
        if !valid_key(k) {
            return Err(format!("{what}: {k:?} is not a dimension key"));
        }
        let raw: Vec<&str> = match val {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a
                .iter()
                .map(|x| x.as_str().ok_or_else(|| format!("{what}.{k}: values are strings")))
                .collect::<Result<_, _>>()?,
            _ => return Err(format!("{what}.{k}: expected a string or a list of strings")),
        };
        let mut values = Vec::new();
        for s in raw.iter().flat_map(|s| s.split('|')) {
            if s.is_empty() || s.len() > MAX_VALUE {
                return Err(format!("{what}.{k}: values must be 1 to {MAX_VALUE} bytes"));
            }
            if !values.iter().any(|x| x == s) {
                values.push(s.to_owned());
            }
        }
        if values.is_empty() {
            return Err(format!("{what}.{k}: no value"));
        }
        out.insert(k.clone(), values);
    }
    Ok(out)
}

/// True when a bot with `bot` may run a task needing `task`: every task key has one of its
/// values among the bot's.
pub fn matches(task: &Dims, bot: &Dims) -> bool {
    task.iter().all(|(k, alts)| bot.get(k).is_some_and(|have| alts.iter().any(|a| have.contains(a))))
}

/// A filter from Swarming's `key:value` tags (or `{key, value}` pairs): each entry AND-ed, its
/// `|` alternatives OR-ed, a key may repeat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter(Vec<(String, Vec<String>)>);

impl Filter {
    /// From `key` and `value` (`a|b`) pairs.
    pub fn pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, String> {
        let mut out = Vec::new();
        for (k, v) in pairs {
            if !valid_key(k) {
                return Err(format!("invalid key {k:?}"));
            }
            let alts: Vec<String> = v.split('|').map(str::to_owned).collect();
            if alts.iter().any(|a| a.is_empty() || a.len() > MAX_VALUE) {
                return Err(format!("invalid value {v:?} of key {k:?}"));
            }
            out.push((k.to_owned(), alts));
        }
        Ok(Self(out))
    }

    /// From tags `key:value` (`key:a|b`).
    pub fn tags(tags: &[String]) -> Result<Self, String> {
        let pairs: Vec<(&str, &str)> = tags
            .iter()
            .map(|t| t.split_once(':').ok_or_else(|| format!("tag {t:?}: expected key:value")))
            .collect::<Result<_, _>>()?;
        Self::pairs(pairs)
    }

    /// True when `d` (every value of each key counts) passes the filter.
    pub fn matches(&self, d: &Dims) -> bool {
        self.0.iter().all(|(k, alts)| d.get(k).is_some_and(|have| alts.iter().any(|a| have.contains(a))))
    }
}

#[cfg(test)]
mod tests;
