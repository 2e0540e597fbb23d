//! Records the reconcile logic keeps: Config records, VMs, bot observations and per-config
//! status (counts, recent errors, backoff).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::{Attributes, Config};

/// A Config as stored: the operator's Config plus what the service tracks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// The Config (durations in seconds, metadata resolved).
    pub config: Config,
    /// Content hash of the file it came from.
    pub revision: String,
    /// The amount the service targets now; kept across imports.
    pub current_amount: u32,
}

/// One slot of a Config (`<prefix>-<index>`) and its current incarnation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Vm {
    /// `<prefix>-<index>`.
    pub id: String,
    /// Config prefix.
    pub config: String,
    /// Index in the pool.
    pub index: u32,
    /// Instance name and bot id: `<prefix>-<index>-<4 chars>`, new for each incarnation.
    pub hostname: String,
    /// The template with `{{.Zone}}` replaced; never changed after creation.
    pub attributes: Attributes,
    /// Swarming server URL.
    pub swarming: String,
    /// Seconds this incarnation lives (the Config's lifetime plus up to 10 %).
    pub lifetime: u64,
    /// Seconds a bot may take to connect or stay dead (0: no connect limit; dead goes at once).
    pub timeout: u64,
    /// Config revision it was made from.
    pub revision: String,
    /// When this record was made.
    pub configured: DateTime<Utc>,
    /// Insert attempt; a new attempt (new requestId) follows an insert that failed for good.
    #[serde(default)]
    pub insert_attempt: u32,
    /// When an insert was first sent for this attempt.
    #[serde(default)]
    pub insert_sent: Option<DateTime<Utc>>,
    /// The instance's creation time (set once).
    #[serde(default)]
    pub created: Option<DateTime<Utc>>,
    /// The instance's selfLink; empty until it is created.
    #[serde(default)]
    pub url: String,
    /// Internal address.
    #[serde(default)]
    pub internal_ip: String,
    /// External address.
    #[serde(default)]
    pub external_ip: String,
    /// The bot's first_seen_ts (set once).
    #[serde(default)]
    pub connected: Option<DateTime<Utc>>,
    /// Scheduled for removal (its Config shrank or went away).
    #[serde(default)]
    pub drained: bool,
    /// When TerminateBot was last sent.
    #[serde(default)]
    pub terminate_sent: Option<DateTime<Utc>>,
    /// Delete attempt; a new attempt (new requestId) follows a delete operation that failed.
    #[serde(default)]
    pub destroy_attempt: u32,
}

impl Vm {
    /// When this incarnation is due for replacement.
    pub fn deadline(&self) -> Option<DateTime<Utc>> {
        self.created.map(|c| c + chrono::Duration::seconds(self.lifetime as i64))
    }

    /// Project of its instance.
    pub fn project(&self) -> &str {
        &self.attributes.project
    }

    /// Zone of its instance.
    pub fn zone(&self) -> &str {
        &self.attributes.zone
    }
}

/// What Swarming last said about a bot (from the ListBots walk or GetBot).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bot {
    /// Bot id.
    pub id: String,
    /// First connection of this bot.
    pub first_seen: Option<DateTime<Utc>>,
    /// Last contact.
    pub last_seen: Option<DateTime<Utc>>,
    /// Dead (no contact for Swarming's death timeout, or stopped).
    pub is_dead: bool,
    /// Deleted from Swarming.
    pub deleted: bool,
    /// Set when it died because of TerminateBot.
    pub termination_task_id: String,
}

/// A bot observation with the time it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    /// The bot.
    pub bot: Bot,
    /// When it was seen.
    pub at: DateTime<Utc>,
}

/// One error recorded on a Config's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// A (project, zone) that is backed off after quota or stockout errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// Counts of a Config's VMs, written by `count_vms`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// The amount targeted.
    pub configured: u32,
    /// VMs with an instance.
    pub created: u32,
    /// VMs whose bot connected.
    pub connected: u32,
    /// Drained VMs still there.
    pub draining: u32,
    /// When counted.
    pub at: Option<DateTime<Utc>>,
}

/// The status of one Config: counts, the last 20 errors, the current backoff.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigStatus {
    /// Prefix.
    pub prefix: String,
    /// Counts.
    pub counts: Counts,
    /// Newest first.
    pub errors: Vec<ErrorEntry>,
    /// Backoff of its (project, zone), while active.
    pub backoff: Option<Backoff>,
}

/// Errors kept per Config.
pub const KEEP_ERRORS: usize = 20;
