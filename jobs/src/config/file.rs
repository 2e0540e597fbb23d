//! A Config file's text, of either kind: a LUCI `vms.cfg` (`*.cfg`, a Config per `vms` block) or
//! YAML/JSON (a Config per document); the importer, `configs convert` and `configs apply` read
//! files through it, so a file means the same everywhere. Every mistake of a file is found in one
//! pass ([`mistakes`]); and a `vms.cfg` is written as YAML with its durations as it wrote them
//! ([`to_yaml`]).

use std::collections::HashMap;
use std::path::Path;

use super::luci::{self, Located, related, relative};
use super::spec::Config;
use super::units::{ConfigError, ConfigErrors, Secs};

/// True for a LUCI `vms.cfg` text proto (`*.cfg`), false for YAML or JSON.
pub fn is_cfg(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "cfg")
}

/// Parses a file's text as [`is_cfg`] says (`cfg`), each Config with where a `vms.cfg` wrote it.
/// The blocks of a `vms.cfg` are read as far as each can be: a block's own mistakes (a prefix an
/// earlier block has among them) stay with it, and [`mistakes`] says them with its Config's
/// ([`luci::read_vms`]). A YAML file is read whole or refused; a prefix in two of its documents
/// is refused, naming both.
pub fn parse(text: &str, origin: &str, cfg: bool) -> Result<Vec<(Config, Option<Located>)>, ConfigErrors> {
    if cfg {
        return Ok(luci::read_vms(text, origin)?.into_iter().map(|(c, at)| (c, Some(at))).collect());
    }
    let all = Config::parse_all(text, origin)?;
    let mut seen = HashMap::<&str, usize>::new();
    let mut twice = Vec::new();
    for (i, c) in all.iter().enumerate() {
        if c.prefix.is_empty() {
            continue;
        }
        if let Some(first) = seen.insert(&c.prefix, i) {
            let rule = format!("document {}: prefix {:?} also in document {}", i + 1, c.prefix, first + 1);
            twice.push(ConfigError { field: origin.to_owned(), rule });
        }
    }
    ConfigErrors::check(twice)?;
    Ok(all.into_iter().map(|c| (c, None)).collect())
}

/// Every mistake of one Config of a file (`origin`), in the order of the text: those found
/// reading its `vms` block, then `first` (found since: a `from_file` that cannot be read), then
/// each of `then` (the rules it breaks) that is not about a field already found wrong; in a
/// `vms.cfg`, each with its block and line.
pub fn mistakes(
    config: &Config,
    at: Option<&Located>,
    origin: &str,
    first: Vec<ConfigError>,
    then: Vec<ConfigError>,
) -> Vec<ConfigError> {
    let prefix = &config.prefix;
    if let Some(at) = at {
        return at.explain_all(origin, prefix, first, then);
    }
    let wrong: Vec<String> = first.iter().map(|e| relative(prefix, &e.field).to_owned()).collect();
    let fresh = |e: &ConfigError| !wrong.iter().any(|w| related(w, relative(prefix, &e.field)));
    let then: Vec<ConfigError> = then.into_iter().filter(fresh).collect();
    first.into_iter().chain(then).collect()
}

/// Configs read from a file as YAML, a document each ([`Config::to_yaml_all`]); a duration a
/// `vms.cfg` wrote as a duration (`lifetime { duration: "1d" }`) is written as it was (`1d`,
/// which the YAML reader takes as it is), one written in seconds as seconds.
pub fn to_yaml(configs: &[(Config, Option<Located>)]) -> Result<String, ConfigError> {
    let mut docs = Vec::new();
    for (c, at) in configs {
        let mut v = c.to_yaml_value()?;
        for (path, written) in at.iter().flat_map(|at| at.durations()) {
            let written = written.trim();
            if let (Some(slot), Ok(secs)) = (find(&mut v, path), Secs::parse(written))
                && slot.as_u64() == Some(secs.0)
            {
                *slot = yaml_serde::Value::String(written.to_owned());
            }
        }
        docs.push(v);
    }
    super::yaml::documents(&docs)
}

/// The value at `path` (`amount.change[0].length`) in `v`, if it is there.
fn find<'a>(v: &'a mut yaml_serde::Value, path: &str) -> Option<&'a mut yaml_serde::Value> {
    let mut at = v;
    for part in path.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((name, i)) => (name, Some(i.strip_suffix(']')?.parse::<usize>().ok()?)),
            None => (part, None),
        };
        at = at.get_mut(name)?;
        if let Some(i) = index {
            at = at.get_mut(i)?;
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests;
