//! What is kept per Config beside its record: recent errors, backoffs, counts and sums of its
//! VMs, and the names of the mark spaces and counters the cleanup scans and status use.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One error recorded on a Config's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorEntry {
    /// When.
    pub time: DateTime<Utc>,
    /// Stage (queue) that met it.
    pub stage: String,
    /// Code: HTTP status or GCE error code (QUOTA_EXCEEDED, …).
    pub code: String,
    /// Message.
    pub message: String,
    /// Zone.
    pub zone: String,
    /// Operation name, if any.
    pub operation: String,
    /// When the stage succeeded again after this error (the error is kept, marked resolved);
    /// absent while it has not (an entry written without it reads as not resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<DateTime<Utc>>,
    /// The VM it is about (its id), when it is about one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<String>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// A (project, zone) that is backed off after quota or stockout errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Backoff {
    /// Project.
    pub project: String,
    /// Zone.
    pub zone: String,
    /// No inserts there before this time.
    pub until: DateTime<Utc>,
    /// Failures in a row.
    pub failures: u32,
    /// Why (QUOTA_EXCEEDED, ZONE_RESOURCE_POOL_EXHAUSTED).
    pub reason: String,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// Counts of a Config's VMs, written by `count_vms`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Counts {
    /// The amount targeted.
    pub configured: u32,
    /// Every VM record of the Config (being made, up, down or being deleted).
    #[serde(default)]
    pub vms: u32,
    /// VMs with an instance.
    pub created: u32,
    /// VMs with an instance not known to be down (stopped, preempted, gone) nor kept warm.
    #[serde(default)]
    pub running: u32,
    /// VMs whose bot connected.
    pub connected: u32,
    /// Drained VMs still there.
    pub draining: u32,
    /// VMs whose bot Swarming reports dead.
    #[serde(default)]
    pub dead: u32,
    /// VMs being replaced because their instance stopped or went away, or their bot never
    /// connected.
    #[serde(default)]
    pub unhealthy: u32,
    /// VMs kept warm (suspended or stopped beyond the target), or waking.
    #[serde(default)]
    pub parked: u32,
    /// When counted.
    pub at: Option<DateTime<Utc>>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// The sums of [`Vm::counted`](super::Vm::counted) over a Config's VMs, by bit: VMs, created, running, connected,
/// draining, bot dead, unhealthy, parked (kept warm).
pub type Sums = [i64; SUMS];
/// How many counts [`Vm::counted`](super::Vm::counted) has.
pub const SUMS: usize = 8;

impl Counts {
    /// The counts of a Config asking for `configured` VMs whose VMs sum to `s`.
    pub fn from_sums(configured: u32, s: &Sums, at: DateTime<Utc>) -> Self {
        let n = |i: usize| s[i].clamp(0, i64::from(u32::MAX)) as u32;
        Counts {
            unknown: Default::default(),
            configured,
            vms: n(0),
            created: n(1),
            running: n(2),
            connected: n(3),
            draining: n(4),
            dead: n(5),
            unhealthy: n(6),
            parked: n(7),
            at: Some(at),
        }
    }
}

/// Mark spaces (first-seen times kept per key) of the cleanup scans.
pub mod marks {
    /// Leak candidates: instances with our label and no VM (`<project>/<zone>/<name>`).
    pub const LEAKS: &str = "leak";
    /// Leak candidates: instance templates with our label that nothing names (`<project>/<name>`).
    pub const TEMPLATE_LEAKS: &str = "template-leak";
    /// Projects an instance template of ours was made in (`<project>`): audited for leaked
    /// templates while one of ours is left there, whether or not a Config still names the project.
    pub const TEMPLATE_PROJECTS: &str = "template-project";
    /// Stale bots: bots named like ours with no VM (`<server>|<bot id>`).
    pub const STALE_BOTS: &str = "stale-bot";
    /// Configs whose VMs waiting for an instance are being gathered into a bulk (`<prefix>`,
    /// since when).
    pub const GATHER: &str = "bulk-gather";
    /// Configs whose instances were looked over for VM records the store lost, once per store
    /// generation (`<prefix>@<generation>`, when).
    pub const ADOPTED: &str = "adopted";
    /// Configs with bulk inserts sent and not yet followed to their end (`<prefix>`): they are
    /// followed even while more VMs are gathered.
    pub const BULKS_OPEN: &str = "bulk-open";
}

/// Names of the per-Config counters.
pub mod counters {
    /// Tasks that went to a dead set.
    pub const DEAD_TASKS: &str = "dead_tasks";
    /// Failed task runs.
    pub const TASK_FAILURES: &str = "task_failures";

    /// VMs made on rank `rank` of a Config's machine types (a Config with fallbacks).
    pub fn placed(rank: u32) -> String {
        format!("placed_rank_{rank}")
    }
}

/// Errors kept per Config.
pub const KEEP_ERRORS: usize = 20;
