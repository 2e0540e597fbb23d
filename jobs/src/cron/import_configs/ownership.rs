//! Who holds a prefix, decided from the files of one round and the stored Configs' sources,
//! before any effect: the file recorded as a Config's source keeps it, a Config made over the
//! API is never taken by a file, and a new prefix may not clash with another Config's.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::{Config, prefixes_clash};
use crate::model::API_SOURCE;

/// What one file says this round: its valid Configs and their revisions (one for most files,
/// one per `vms` block of a `vms.cfg`), or its errors, all of them, each with the prefix of the
/// Config it is about (empty when unknown, or the file's own): a file is applied whole or not at
/// all.
pub type Read = Result<Vec<(Config, String)>, Vec<(String, String)>>;

/// What the files decide, before any effect.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Prefix → (file, Config, revision) to apply.
    pub accept: BTreeMap<String, (String, Config, String)>,
    /// (file, prefix, why) of files whose Config is not applied.
    pub rejects: Vec<(String, String, String)>,
    /// Prefixes whose Config must not be orphaned (a file still holds or names them).
    pub held: BTreeSet<String>,
}

impl Plan {
    /// True when some file has an error (it cannot be read, parsed or validated, or it is
    /// refused): nothing is orphaned or deleted that round.
    pub fn blocked(&self) -> bool {
        !self.rejects.is_empty()
    }
}

/// Decides ownership: `files` by file name, `owners` the source of each stored Config by prefix
/// (its file name, [`API_SOURCE`], or empty when unknown).
pub fn plan(files: &BTreeMap<String, Read>, owners: &BTreeMap<String, String>) -> Plan {
    let mut p = Plan::default();
    let mut claims: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (path, read) in files {
        match read {
            Ok(cs) => cs.iter().for_each(|(c, _)| claims.entry(c.prefix.as_str()).or_default().push(path)),
            Err(errors) => {
                p.rejects.extend(errors.iter().map(|(prefix, e)| (path.clone(), prefix.clone(), e.clone())));
            }
        }
    }
    // A stored Config is held by its source file while that file exists and does not name
    // another prefix (an erroring file keeps what it holds).
    let holds = |prefix: &str, source: &str| match files.get(source) {
        Some(Ok(cs)) => cs.iter().any(|(c, _)| c.prefix == prefix),
        Some(Err(_)) => true,
        None => false,
    };
    let named: BTreeSet<&str> = files
        .values()
        .flat_map(|r| match r {
            Ok(cs) => cs.iter().map(|(c, _)| c.prefix.as_str()).collect::<Vec<_>>(),
            Err(errors) => errors.iter().map(|(prefix, _)| prefix.as_str()).collect(),
        })
        .collect();
    let mut fresh = Vec::new();
    for (prefix, paths) in &claims {
        let chosen = match owners.get(*prefix) {
            Some(source) if source == API_SOURCE => {
                Err(format!("prefix {prefix:?} belongs to a Config made over the API"))
            }
            Some(source) if paths.contains(&source.as_str()) => Ok(source.as_str()),
            Some(source) if holds(prefix, source) => {
                Err(format!("prefix {prefix:?} belongs to {source}, which has an error of its own"))
            }
            _ if paths.len() == 1 => Ok(paths[0]),
            _ => Err(format!(
                "prefix {prefix:?} is claimed by several files ({}); none is applied",
                paths.join(", ")
            )),
        };
        for path in paths {
            if chosen.as_ref().is_ok_and(|c| c == path) {
                continue;
            }
            let why = match &chosen {
                Ok(owner) => format!("prefix {prefix:?} belongs to {owner}"),
                Err(e) => e.clone(),
            };
            p.rejects.push(((*path).to_owned(), (*prefix).to_owned(), why));
        }
        if let Ok(path) = chosen {
            if !owners.contains_key(*prefix) {
                fresh.push(*prefix);
            }
            let Some(Ok(cs)) = files.get(path) else { continue };
            let Some((c, rev)) = cs.iter().find(|(c, _)| c.prefix == *prefix) else { continue };
            p.accept.insert((*prefix).to_owned(), (path.to_owned(), c.clone(), rev.clone()));
        }
    }
    // A new prefix may not be a prefix of another Config's (API ones too), nor have one as its
    // prefix.
    for prefix in &fresh {
        let other = owners
            .keys()
            .map(String::as_str)
            .chain(fresh.iter().copied())
            .find(|o| prefixes_clash(prefix, o));
        if let Some(other) = other
            && let Some((path, _, _)) = p.accept.remove(*prefix)
        {
            let why = format!("prefix {prefix:?} and the Config {other:?}: one is a prefix of the other");
            p.rejects.push((path, (*prefix).to_owned(), why));
        }
    }
    // Held: what is applied, what any file names (even one refused), what a file that is not
    // applied under another prefix was the source of, and every Config made over the API (one
    // deleted over the API goes its own way, see `run`).
    let gone_or_moved =
        |source: &str| !files.contains_key(source) || p.accept.values().any(|(path, _, _)| path == source);
    let held: BTreeSet<String> = owners
        .iter()
        .filter(|(prefix, source)| {
            *source == API_SOURCE
                || named.contains(prefix.as_str())
                || holds(prefix, source)
                || !gone_or_moved(source)
        })
        .map(|(prefix, _)| prefix.clone())
        .chain(p.accept.keys().cloned())
        .collect();
    p.held = held;
    p
}
