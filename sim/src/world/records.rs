//! The world's records of what `gce_bulk`'s calls and the rate quotas keep: a bulkInsert's
//! outcome per zone, instance templates, and the calls counted per project and group. Only the
//! world's methods change them (`bulk.rs`, `templates.rs`, `rate.rs`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::Value;

/// What a bulkInsert made, per zone (`instancesBulkInsertOperationMetadata.perLocationStatus`).
#[derive(Debug, Clone, Default)]
pub struct BulkOutcome {
    /// Counts by zone.
    pub(crate) zones: BTreeMap<String, ZoneOutcome>,
    /// `minCount` was not met: what was made is deleted (ROLLING_BACK until DONE).
    pub(crate) rolled_back: bool,
}

/// A bulkInsert's counts in one zone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZoneOutcome {
    /// Instances meant for the zone.
    pub(crate) target: u32,
    /// Made.
    pub(crate) created: u32,
    /// Not made (stockout, quota, the name exists).
    pub(crate) failed: u32,
    /// Made, then deleted in a rollback.
    pub(crate) deleted: u32,
}

/// A project's use of its rate quotas in the current windows.
#[derive(Debug, Clone, Default)]
pub(super) struct ProjectRate {
    /// The minute (of the simulator's clock, since the epoch) `used` counts in.
    pub(super) minute: i64,
    /// Calls taken this minute, by group (in the order of [`crate::quota::Group::ALL`]).
    pub(super) used: [u64; 4],
    /// The second `bulk_this_second` counts in.
    pub(super) second: i64,
    /// Bulk inserts taken this second.
    pub(super) bulk_this_second: u64,
    /// Bulk insert operations made and not yet seen DONE.
    pub(super) bulk_ops: Vec<String>,
}

/// Compute Engine calls counted for the summary.
#[derive(Debug, Clone, Default)]
pub struct ApiCalls {
    /// Calls by project, then group (in the order of [`crate::quota::Group::ALL`]), taken or refused.
    pub requests: BTreeMap<String, [u64; 4]>,
    /// Calls refused for a rate quota, by method.
    pub rate_limited: BTreeMap<String, u64>,
}

/// An instance template.
#[derive(Debug, Clone)]
pub struct Template {
    /// Unique id.
    pub id: u64,
    /// Insert time.
    pub created: DateTime<Utc>,
    /// `description`, as given.
    pub description: Option<String>,
    /// `properties`, as given (an object).
    pub properties: Value,
}

/// `(project, name)` of a template.
pub type TemplateKey = (String, String);
