//! What operators see of a Config: its state, counts, errors, backoffs, zones and ranks, pause,
//! breaker, rollout and Spot failover; and the errors of Config files that hold no Config.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::kept::{Backoff, Counts, ErrorEntry};
use crate::model::records::Pause;

/// One zone of a multi-zone Config, as status shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ZoneStatus {
    /// The zone.
    pub zone: String,
    /// Its weight.
    pub weight: u32,
    /// The Config's VMs in it (draining ones too), counted now.
    #[serde(default)]
    pub vms: u32,
    /// Those whose bot is connected.
    #[serde(default)]
    pub connected: u32,
    /// Those draining.
    #[serde(default)]
    pub draining: u32,
    /// Its backoff (quota, stockout), while active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
}

/// One rank of a Config's machine types (a Config with `fallback_machine_types`), as status
/// shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RankStatus {
    /// The rank: 0 for `attributes.machine_type`, then each fallback in order.
    pub rank: u32,
    /// Its machine type's name.
    pub machine_type: String,
    /// The Config's VMs on it (draining ones too), counted now.
    #[serde(default)]
    pub vms: u32,
    /// Those whose bot is connected.
    #[serde(default)]
    pub connected: u32,
    /// VMs placed on it, ever (each record made on it counts once).
    #[serde(default)]
    pub placed: u64,
    /// The active backoffs of its machine type, one per zone of the Config where it backs off
    /// (each one's `zone` is the zone's name): no new VM is made on it there until `until`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backoffs: Vec<Backoff>,
}

/// Where a Config stands in its life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConfigState {
    /// Imported and reconciled.
    #[default]
    Active,
    /// Its file is gone; it is deleted at `delete_at` unless the file comes back.
    Orphaned,
    /// Deleted; its VMs are being drained.
    Deleted,
    /// Its record (or its VM index) does not decode; `corrupt` says why. Import rewrites it
    /// from its file, or deletes it when the file is gone.
    Corrupt,
    /// Its record was written by a newer build in a format this one does not act on: left to
    /// that build (docs/operating.md, Upgrading); its errors say so.
    Newer,
}

/// The status of one Config: counts, the last 20 errors, the current backoff.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfigStatus {
    /// Prefix.
    pub prefix: String,
    /// Active, orphaned or deleted.
    pub state: ConfigState,
    /// The file it comes from, or `api` for a Config made over the API.
    pub source: String,
    /// Its revision (content hash of the file).
    pub revision: String,
    /// While `corrupt`: which record or key does not decode, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<String>,
    /// While orphaned: when it will be deleted and its VMs drained.
    pub delete_at: Option<DateTime<Utc>>,
    /// False while its zone and disk types could not be checked against Compute Engine.
    pub verified: bool,
    /// Counts.
    pub counts: Counts,
    /// Tasks of this Config that went to a dead set, ever (each is also in `errors`): a retry or
    /// a purge does not lower it; the dead sets say which are dead now.
    pub dead_tasks: u64,
    /// Failed task runs of this Config (retried or not), ever.
    pub task_failures: u64,
    /// Newest first; a resolved error has `resolved` set.
    pub errors: Vec<ErrorEntry>,
    /// Backoff of its (project, zone), while active; for a multi-zone Config, its own backoff or
    /// else the first of its zones that backs off; for a Config with ranks, else the first
    /// rank's machine type that backs off (`zone` is then `<zone>/<machine type>`).
    pub backoff: Option<Backoff>,
    /// A multi-zone Config's zones: weight, VMs, connected bots and active backoff of each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<ZoneStatus>,
    /// A Config with fallback machine types: each rank's machine type, VMs, connected bots,
    /// placements and active backoffs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankStatus>,
    /// Set while this Config is paused (who, why, since when).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// True while every Config is paused (the global pause).
    #[serde(default)]
    pub paused_all: bool,
    /// The pause in force: its own, else the global one (the one rule, `pause::in_force`); what
    /// the dashboard, the CLI and `/metrics` show as paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_in_force: Option<Pause>,
    /// Its rolling update, while one goes on (since when, VMs updated and outdated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<crate::model::rollout_mark::Rollout>,
    /// Its circuit breaker, while open (no VM is replaced but a canary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<crate::model::breaker_state::Open>,
    /// A demand-driven Config's last reading of its work: pending, busy, idle, target and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<crate::model::demand_reading::DemandState>,
    /// A Spot pool's failover (a Config with `spot_failover`): the failover in force, the
    /// preemptions and refusals counted toward one, the rule and the totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spot: Option<crate::model::spot_state::SpotStatus>,
    /// Its provider's per-pool resources (Compute Engine: its instance templates, one per
    /// revision still in use): name, revision, made or not, being removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<crate::model::PoolResource>,
    /// USD per hour of one running VM it makes now, at list price (`status` only): its machine
    /// type in its region, Spot or standard, plus its disks; absent when `unpriced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<crate::prices::book::Usd>,
    /// Why it has no price (`status` only): a machine type, disk or region without a SKU in
    /// the price book, a disk without a size, a static pool. Never shown as free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpriced: Option<String>,
    /// USD per hour its VMs cost now as billed (running, suspended, stopped; disks included),
    /// from its ledger (`status` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_hour: Option<crate::prices::book::Usd>,
    /// USD its VMs cost so far this month (UTC), from its ledger (`status` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_this_month: Option<crate::prices::book::Usd>,
    /// While its tenant's budget holds its growth (`status` only): the numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::model::ledger::Hold>,
}

/// A Config file the service does not follow as written: one it cannot apply (it cannot be read,
/// parsed or validated, or it claims a prefix another file holds), or one gone whose Config is
/// kept because other files have errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileError {
    /// The file.
    pub path: String,
    /// The prefix it names, if it could be read.
    pub prefix: String,
    /// Since when.
    pub since: DateTime<Utc>,
    /// What is wrong.
    pub message: String,
    /// Which problem it is (absent: `not_applied`).
    #[serde(default, skip_serializing_if = "FileProblem::is_not_applied")]
    pub kind: FileProblem,
    /// The owner groups of the Config it names, if known (from the file, or the Config stored
    /// under its prefix): who may read this entry besides admins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Vec<String>>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// A [`FileError`]'s problem.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FileProblem {
    /// The file is not applied: its Config (if any) stays as it was.
    #[default]
    NotApplied,
    /// The file is gone, but its Config is not deleted: deletion waits while other files have
    /// errors (one of them may be the same Config moved and mistyped); `message` names them.
    DeletionHeld,
}

impl FileProblem {
    fn is_not_applied(&self) -> bool {
        *self == FileProblem::NotApplied
    }
}
