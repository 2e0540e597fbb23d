//! The rolling-update mark on a Config record and the pure rules around it: which VMs are
//! outdated, and when a change of a Config starts a rollout (the steps are `crate::rollout`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{ConfigRecord, Vm};
use crate::config::{Config, UpdateMode};

/// A rolling update going on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rollout {
    /// Since when.
    pub since: DateTime<Utc>,
    /// VMs made from the new attributes (at the last look).
    pub updated: u32,
    /// VMs made from older ones, not yet retired (at the last look).
    pub outdated: u32,
}

/// True when `vm` was made from other instance attributes than `c` has now.
pub fn outdated(c: &Config, vm: &Vm) -> bool {
    !c.is_static() && (!c.zone_names().contains(&vm.zone()) || vm.attributes != c.attributes_in(vm.zone()))
}

/// The rollout mark of a Config record replacing `old` with `new`: a new one when the instance
/// attributes (or zones) change and the update is rolling, else `old`'s (one going on goes on).
pub fn changed(old: &ConfigRecord, new: &Config, now: DateTime<Utc>) -> Option<Rollout> {
    let o = &old.config;
    let other = o.attributes != new.attributes || o.zones != new.zones;
    let rolling = new.update.mode == UpdateMode::Rolling && !new.is_static();
    match (other && rolling && !old.revision.is_empty(), &old.rollout) {
        (true, _) => Some(Rollout { since: now, updated: 0, outdated: 0 }),
        (false, r) if rolling => r.clone(),
        _ => None,
    }
}
