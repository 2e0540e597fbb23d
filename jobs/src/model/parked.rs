//! A VM kept warm: suspended or stopped beyond its Config's target, to be resumed before a new
//! VM is made.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How a warm VM is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Park {
    /// `instances.suspend`: memory kept, only storage billed; `instances.resume` wakes it.
    Suspend,
    /// `instances.stop`: disks kept; `instances.start` boots it again.
    Stop,
}

/// A VM's warm state: parked (or on its way), or waking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Parked {
    /// Suspended or stopped.
    pub how: Park,
    /// When it was asked to park.
    pub since: DateTime<Utc>,
    /// True once Compute said it is parked (the operation is done).
    #[serde(default)]
    pub done: bool,
    /// Set when it was asked to wake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waking: Option<DateTime<Utc>>,
    /// The operation followed (park's, then wake's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operation: String,
    /// The turn of its request in flight ([`crate::model::Vm::power_turns`] when it was asked):
    /// its request's id names it.
    #[serde(default)]
    pub turns: u32,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}
