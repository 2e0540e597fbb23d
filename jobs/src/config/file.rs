//! A Config file's text, of either kind: a LUCI `vms.cfg` (`*.cfg`, a Config per `vms` block) or
//! YAML/JSON (a Config per document); the importer, `configs convert` and `configs apply` read
//! files through it, so a file means the same everywhere.

use std::collections::HashMap;
use std::path::Path;

use super::luci::{self, Located};
use super::spec::Config;
use super::units::ConfigError;

/// True for a LUCI `vms.cfg` text proto (`*.cfg`), false for YAML or JSON.
pub fn is_cfg(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "cfg")
}

/// Parses a file's text as [`is_cfg`] says (`cfg`), each Config with where a `vms.cfg` wrote it;
/// a prefix twice in one file is refused, naming both places.
pub fn parse(text: &str, origin: &str, cfg: bool) -> Result<Vec<(Config, Option<Located>)>, ConfigError> {
    let all: Vec<(Config, Option<Located>)> = match cfg {
        true => luci::parse_vms(text, origin)?.into_iter().map(|(c, at)| (c, Some(at))).collect(),
        false => Config::parse_all(text, origin)?.into_iter().map(|c| (c, None)).collect(),
    };
    let mut seen = HashMap::<&str, usize>::new();
    for (i, (c, at)) in all.iter().enumerate() {
        if c.prefix.is_empty() {
            continue;
        }
        if let Some(first) = seen.insert(&c.prefix, i) {
            return Err(match (at, &all[first].1) {
                (Some(at), Some(was)) => at.twice(origin, &c.prefix, was.line),
                _ => ConfigError {
                    field: origin.to_owned(),
                    rule: format!("document {}: prefix {:?} also in document {}", i + 1, c.prefix, first + 1),
                },
            });
        }
    }
    Ok(all)
}
