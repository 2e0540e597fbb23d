//! The rolling-update mark on a Config record (when it starts and which VMs are outdated:
//! `wanted.rs`; the steps: `crate::rollout`).

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
}
