//! The circuit breaker's state on a Config record, and the hold an open breaker puts on it
//! (the breaker's logic is `crate::breaker`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{ConfigRecord, Pause};

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
}

impl BreakerState {
    /// Closed and no failure counted (nothing to store).
    pub fn is_closed_clean(&self) -> bool {
        self.failed_in_a_row == 0 && self.open.is_none()
    }
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
}

/// The hold an open breaker puts on `rec` (as a pause by [`BY`]), unless `vm_id` is its canary.
pub fn hold(rec: &ConfigRecord, vm_id: Option<&str>) -> Option<Pause> {
    let open = rec.breaker.open.as_ref()?;
    if vm_id.is_some() && open.canary.as_deref() == vm_id {
        return None;
    }
    Some(Pause { by: BY.into(), reason: open.reason.clone(), at: open.since })
}
