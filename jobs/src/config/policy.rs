//! A pool's policies beyond its size: its zones and their weights, its circuit breaker, and how
//! a change of its instance attributes rolls out.

use serde::{Deserialize, Serialize};

use super::units::Secs;

/// How a change of instance attributes reaches the VMs made before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UpdateMode {
    /// Replaced gradually now: up to `max_surge` extra VMs are made, and old ones retired while
    /// at least `amount - max_unavailable` bots are connected.
    #[default]
    Rolling,
    /// Replaced at their lifetime deadline (LUCI's behaviour).
    OnLifetime,
}

/// A Config's update policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
#[schemars(deny_unknown_fields)]
pub struct Update {
    /// `rolling` (default) or `on_lifetime`.
    pub mode: UpdateMode,
    /// VMs made beyond the amount during a rollout.
    pub max_surge: u32,
    /// Connected bots the pool may fall below its amount by during a rollout.
    pub max_unavailable: u32,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Default for Update {
    fn default() -> Self {
        Self { unknown: Default::default(), mode: UpdateMode::Rolling, max_surge: 1, max_unavailable: 0 }
    }
}

/// A Config's circuit breaker: after `after` VMs in a row never connect, or die within `within`
/// of connecting, no VM is replaced (the others keep working; deletions go on) but one canary
/// at a time, with a backoff; the breaker closes when a canary connects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
#[schemars(deny_unknown_fields)]
pub struct Breaker {
    /// Failed VMs in a row that open it (0: never).
    pub after: u32,
    /// A bot that dies this soon after connecting counts as a failure.
    pub within: Secs,
    /// First wait before a canary; doubles after each failed canary, up to an hour.
    pub canary_after: Secs,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Default for Breaker {
    fn default() -> Self {
        Self { unknown: Default::default(), after: 5, within: Secs(600), canary_after: Secs(60) }
    }
}

/// A zone of a multi-zone Config and its weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ZoneWeight {
    /// The zone, e.g. `us-central1-b`.
    pub zone: String,
    /// Its share of new VMs, relative to the others' (default 1, at most 1000; 0: new VMs only
    /// while every weighted zone backs off).
    #[serde(default = "one")]
    pub weight: u32,
    /// Filled in from the Config's `region` when it was applied (not written by its operator):
    /// filled in again, from the region's zones then, each time it is applied.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_region: bool,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

fn one() -> u32 {
    1
}

/// Most zones of a multi-zone Config.
pub const MAX_ZONES: usize = 16;

/// A pool sized by the work waiting for it: the amount it targets is `busy + ⌈pending /
/// per_bot⌉ + min_idle`, always inside its `amount` bounds (and a schedule window's). It grows
/// at once; it shrinks only by VMs whose bots have been idle longer than `idle_timeout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
#[schemars(deny_unknown_fields)]
pub struct Demand {
    /// The dimensions of the tasks it serves (`pool` required): a pending task counts when its
    /// tags hold every one of them (Swarming's `CountTasks` tag filter).
    pub dimensions: std::collections::BTreeMap<String, String>,
    /// Tasks one bot runs at once.
    pub per_bot: u32,
    /// Idle bots kept beyond the work, ready for the next task.
    pub min_idle: u32,
    /// How long a bot stays idle before its VM may go.
    pub idle_timeout: Secs,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Default for Demand {
    fn default() -> Self {
        Self {
            unknown: Default::default(),
            dimensions: Default::default(),
            per_bot: 1,
            min_idle: 0,
            idle_timeout: Secs(600),
        }
    }
}

impl Demand {
    /// The dimensions as Swarming tags (`key:value`), in key order.
    pub fn tags(&self) -> Vec<String> {
        self.dimensions.iter().map(|(k, v)| format!("{k}:{v}")).collect()
    }
}

/// Most dimensions of a demand-driven pool.
pub const MAX_DIMENSIONS: usize = 32;

/// A warm pool: VMs beyond the target kept suspended (memory kept, only storage billed) or
/// stopped, up to these numbers, instead of deleted; rising demand resumes them before new ones
/// are made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
#[schemars(deny_unknown_fields)]
pub struct Warm {
    /// VMs kept suspended.
    pub suspended: u32,
    /// VMs kept stopped (beyond the suspended ones).
    pub stopped: u32,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Warm {
    /// How many VMs it keeps in all.
    pub fn room(&self) -> u32 {
        self.suspended.saturating_add(self.stopped)
    }
}

/// A Spot pool's failover: when its VMs are preempted, or its Spot inserts refused (stockout,
/// quota), more than `more_than` times within `within`, the VMs it makes are standard ones
/// until `cooldown` has passed; then it makes Spot VMs again (the standard ones are replaced when
/// their lifetime ends, not before). Only for a Spot or preemptible pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
#[schemars(deny_unknown_fields)]
pub struct SpotFailover {
    /// Preemptions and refusals within `within` that are too many (one more fails over).
    pub more_than: u32,
    /// The window they are counted in.
    pub within: Secs,
    /// How long the pool makes standard VMs once failed over (each further burst of more than
    /// `more_than` lengthens it to `cooldown` from then).
    pub cooldown: Secs,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Default for SpotFailover {
    fn default() -> Self {
        Self { unknown: Default::default(), more_than: 3, within: Secs(600), cooldown: Secs(1800) }
    }
}
