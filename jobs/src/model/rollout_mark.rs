//! The rolling-update mark on a Config record (when it starts and which VMs are outdated:
//! `wanted.rs`; the steps: `crate::fleet::rollout`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A rolling update going on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rollout {
    /// Since when.
    pub since: DateTime<Utc>,
    /// VMs made from the new attributes (at the last look).
    pub updated: u32,
    /// VMs made from older ones, not yet retired (at the last look).
    pub outdated: u32,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// The connected bots a rolling update of a pool of `amount` keeps: it retires a VM of older
/// attributes only while more are connected (`crate::fleet::rollout::step`).
pub fn min_connected(amount: u32, update: &crate::config::Update) -> u32 {
    amount.saturating_sub(update.max_unavailable)
}

/// Most VMs of another provider a provider change drains at a time, in a pool of `amount`: a
/// tenth of it, at least one (`expand_config`'s switch step).
pub fn switch_batch(amount: u32) -> u32 {
    (amount / 10).max(1)
}
