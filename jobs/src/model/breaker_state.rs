//! The circuit breaker's state on a Config record, and the hold an open breaker puts on it
//! (the breaker's logic is `crate::safety::breaker`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Who holds a Config whose breaker is open (as a pause's `by`).
pub const BY: &str = "breaker";

/// The breaker's state on a Config record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BreakerState {
    /// VMs that failed in a row.
    #[serde(default)]
    pub failed_in_a_row: u32,
    /// When the first of them failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Set while open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<Open>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// An open breaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Open {
    /// Since when.
    pub since: DateTime<Utc>,
    /// Why (the failures that opened it).
    pub reason: String,
    /// Canaries that failed since.
    pub canaries: u32,
    /// When the next canary may be made.
    pub next_canary: DateTime<Utc>,
    /// The canary on its way (its VM id), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<String>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}
