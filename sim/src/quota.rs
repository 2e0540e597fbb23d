//! Compute Engine's API rate quotas as settings (`--quota none|gce-default|<file>`): the quota
//! groups a call counts in, the per-minute limits of each group per project, and the extra limits
//! of bulk inserts (per second, and running at once). The world counts the calls (`world::rate`).
//!
//! `gce-default` is the older published defaults of Compute Engine: 1 500 calls a minute per
//! project in each group (mutations, reads, lists, operation reads); a bulk insert counts as one
//! mutation and bulk inserts are also held to 20 a second and 10 running at once per project.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::names::valid_name;

/// A quota group: the calls of a project counted together per minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    /// "Queries": insert, delete, bulkInsert, suspend, resume, stop, start, ...
    Mutations,
    /// `*.get` of resources.
    Reads,
    /// `*.list`, `*.aggregatedList`.
    Lists,
    /// Operation reads: `zoneOperations.get`/`wait`, `regionOperations.get`, `globalOperations.get`.
    Operations,
}

impl Group {
    /// Every group, in the order of the counts.
    pub const ALL: [Group; 4] = [Group::Mutations, Group::Reads, Group::Lists, Group::Operations];

    /// Its name in the summary and the quota file (`mutations`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Group::Mutations => "mutations",
            Group::Reads => "reads",
            Group::Lists => "lists",
            Group::Operations => "operations",
        }
    }

    /// The group of a counted method (`compute.instances.insert`, ...); none for calls that are
    /// not Compute Engine's (Swarming's, the admin API's).
    pub fn of(method: &str) -> Option<Group> {
        let rest = method.strip_prefix("compute.")?;
        let (service, verb) = rest.rsplit_once('.')?;
        Some(match verb {
            "get" | "wait" if service.ends_with("Operations") => Group::Operations,
            "get" => Group::Reads,
            "list" | "aggregatedList" => Group::Lists,
            _ => Group::Mutations,
        })
    }
}

/// Whether `method` is a bulk insert (zonal or regional), held to the bulk limits too.
pub fn is_bulk(method: &str) -> bool {
    method.starts_with("compute.") && method.ends_with(".bulkInsert")
}

/// The limits of one project. 0: no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Mutations a minute.
    pub mutations: u64,
    /// Reads a minute.
    pub reads: u64,
    /// Lists a minute.
    pub lists: u64,
    /// Operation reads a minute.
    pub operations: u64,
    /// Bulk inserts a second.
    pub bulk_per_second: u64,
    /// Bulk insert operations not yet DONE.
    pub bulk_running: u64,
}

impl Limits {
    /// Compute Engine's older published defaults.
    pub const GCE_DEFAULT: Limits = Limits {
        mutations: 1500,
        reads: 1500,
        lists: 1500,
        operations: 1500,
        bulk_per_second: 20,
        bulk_running: 10,
    };

    /// The per-minute limit of `group` (0: none).
    pub fn per_minute(&self, group: Group) -> u64 {
        match group {
            Group::Mutations => self.mutations,
            Group::Reads => self.reads,
            Group::Lists => self.lists,
            Group::Operations => self.operations,
        }
    }

    fn patched(mut self, p: &LimitsPatch) -> Self {
        macro_rules! take {
            ($($f:ident),*) => { $( if let Some(v) = p.$f { self.$f = v; } )* };
        }
        take!(mutations, reads, lists, operations, bulk_per_second, bulk_running);
        self
    }
}

/// Limits as a quota file gives them: each one optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsPatch {
    mutations: Option<u64>,
    reads: Option<u64>,
    lists: Option<u64>,
    operations: Option<u64>,
    bulk_per_second: Option<u64>,
    bulk_running: Option<u64>,
}

/// A quota file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct QuotaFile {
    #[serde(default)]
    default: LimitsPatch,
    #[serde(default)]
    projects: BTreeMap<String, LimitsPatch>,
}

/// The rate quotas in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateQuota {
    /// How they were given: `none`, `gce-default`, or the file's path.
    pub source: String,
    /// The limits of every project not named in `projects`; none: no rate quota at all.
    pub default: Option<Limits>,
    /// Limits of single projects.
    pub projects: BTreeMap<String, Limits>,
}

impl Default for RateQuota {
    fn default() -> Self {
        Self::gce_default()
    }
}

impl RateQuota {
    /// No rate quota: every call is taken.
    pub fn none() -> Self {
        Self { source: "none".into(), default: None, projects: BTreeMap::new() }
    }

    /// Compute Engine's older published defaults for every project.
    pub fn gce_default() -> Self {
        Self { source: "gce-default".into(), default: Some(Limits::GCE_DEFAULT), projects: BTreeMap::new() }
    }

    /// From the flag's value: `none`, `gce-default`, or the path of a quota file.
    pub fn parse(arg: &str) -> Result<Self, String> {
        match arg {
            "none" => Ok(Self::none()),
            "gce-default" => Ok(Self::gce_default()),
            path => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("quota file {path}: {e}"))?;
                Self::from_json(&text, path).map_err(|e| format!("quota file {path}: {e}"))
            }
        }
    }

    /// From a quota file's text: `{"default": {LIMITS}, "projects": {PROJECT: {LIMITS}}}`, LIMITS
    /// being any of `mutations`, `reads`, `lists`, `operations` (a minute), `bulk_per_second`,
    /// `bulk_running` (0: no limit). Limits not given in `default` are `gce-default`'s; those not
    /// given for a project are `default`'s.
    pub fn from_json(text: &str, source: &str) -> Result<Self, String> {
        let file: QuotaFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let default = Limits::GCE_DEFAULT.patched(&file.default);
        let mut projects = BTreeMap::new();
        for (p, patch) in &file.projects {
            if !valid_name(p) {
                return Err(format!("projects.{p}: not a project name like my-project"));
            }
            projects.insert(p.clone(), default.patched(patch));
        }
        Ok(Self { source: source.to_owned(), default: Some(default), projects })
    }

    /// The limits of `project`; none when there is no rate quota.
    pub fn limits(&self, project: &str) -> Option<&Limits> {
        self.projects.get(project).or(self.default.as_ref())
    }
}

#[cfg(test)]
mod tests;
