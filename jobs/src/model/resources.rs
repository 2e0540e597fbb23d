//! A Config's per-pool resources, as its record keeps them: what its provider makes for the
//! pool as a whole (Compute Engine: one instance template per revision of the Config), made
//! once per revision and removed once no VM of that revision is left (the rules on the record:
//! `ConfigRecord::unused` and kin, in `model/wanted.rs`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One resource of a Config, made for one of its revisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PoolResource {
    /// The Config revision it is made for.
    pub revision: String,
    /// Its name at the provider (an instance template's).
    pub name: String,
    /// When it was first asked for; with `attempt` it names each request to the provider, so a
    /// request sent again is the same one.
    pub since: DateTime<Utc>,
    /// The provider's operation making or removing it, while one runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operation: String,
    /// When the provider had made it (from then on it is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<DateTime<Utc>>,
    /// When its removal started (no VM of its revision was left); never used again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removing: Option<DateTime<Utc>>,
    /// Requests that failed for good so far: the next one is a new request.
    #[serde(default)]
    pub attempt: u32,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl PoolResource {
    /// A resource asked for at `now`, not made yet.
    pub fn new(revision: &str, name: &str, now: DateTime<Utc>) -> Self {
        Self {
            unknown: Default::default(),
            revision: revision.to_owned(),
            name: name.to_owned(),
            since: now,
            operation: String::new(),
            ready: None,
            removing: None,
            attempt: 0,
        }
    }

    /// True when it is made and not being removed: what new machines may be made from.
    pub fn usable(&self) -> bool {
        self.ready.is_some() && self.removing.is_none()
    }
}
