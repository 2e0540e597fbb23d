//! The audit trail: one [`AuditEntry`] per operator action or Config change (over the API, from
//! a Config file, by the importer once a deletion's grace ends), kept newest first in a list of
//! bounded length per Config, and in one global list for actions on no one Config (the global
//! pause, queue-wide retries and purges).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::records::ConfigRecord;

/// The prefix of the global list: actions on no one Config (no Config has an empty prefix).
pub const GLOBAL_AUDIT: &str = "";

/// What was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    /// A Config was created (over the API or from a new file).
    Create,
    /// A Config was replaced by a new revision (or written again: its file came back, or it
    /// was applied again while deleted; `detail` says so).
    Update,
    /// A Config was deleted over the API, or its file went: its VMs are drained after the
    /// grace unless it comes back.
    Delete,
    /// The grace of a deletion ended: the Config record is gone, its VMs are being drained.
    Remove,
    /// Its amount was set.
    Amount,
    /// It was paused.
    Pause,
    /// Its pause was lifted.
    Resume,
    /// Every Config was paused.
    PauseAll,
    /// The global pause was lifted.
    ResumeAll,
    /// One of its VMs was recycled (`detail` names it).
    Recycle,
    /// One dead task was put back (`detail` names the queue and the task).
    RetryTask,
    /// Every dead task of a queue was put back.
    RetryDead,
    /// Every dead task of a queue was dropped.
    PurgeDead,
    /// Every pending task of a queue was dropped.
    PurgePending,
    /// A tenant's budget (`budget_per_month`, `max_cost_per_hour`) was set, changed or removed
    /// in the settings (`detail` says from what to what; the actor is `settings`).
    Budget,
}

/// One action, as the audit trail keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditEntry {
    /// When.
    pub at: DateTime<Utc>,
    /// Who: an API token's name, `file:<name>` for a Config file (its name in the configs
    /// directory), `import_configs` for a deletion whose grace ended.
    pub actor: String,
    /// What.
    pub action: AuditAction,
    /// The Config it was done to; empty in the global list.
    pub prefix: String,
    /// The Config's revision before (none for a creation, or outside a Config).
    pub before_revision: Option<String>,
    /// Its revision after (none once removed, or outside a Config).
    pub after_revision: Option<String>,
    /// A few words more: `amount 3 → 5`, a pause's reason, the VM recycled, the queue.
    pub detail: String,
    /// The Config's owner groups when it was written: who may read the entry once the Config
    /// itself is gone (the rule that reads the Config reads its history).
    #[serde(default)]
    pub owner: Vec<String>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl AuditEntry {
    /// An action on the Config `rec` (its prefix and owner; its revision before and after).
    pub fn on(rec: &ConfigRecord, at: DateTime<Utc>, actor: &str, action: AuditAction) -> Self {
        Self {
            unknown: Default::default(),
            at,
            actor: actor.to_owned(),
            action,
            prefix: rec.config.prefix.clone(),
            before_revision: Some(rec.revision.clone()),
            after_revision: Some(rec.revision.clone()),
            detail: String::new(),
            owner: rec.config.owner.clone(),
        }
    }

    /// An action on no one Config (the global list).
    pub fn global(at: DateTime<Utc>, actor: &str, action: AuditAction) -> Self {
        Self {
            unknown: Default::default(),
            at,
            actor: actor.to_owned(),
            action,
            prefix: GLOBAL_AUDIT.to_owned(),
            before_revision: None,
            after_revision: None,
            detail: String::new(),
            owner: Vec::new(),
        }
    }

    /// With `detail`.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    /// With the revision before (`None`: there was no Config).
    pub fn before(mut self, revision: Option<&str>) -> Self {
        self.before_revision = revision.map(str::to_owned);
        self
    }

    /// With the revision after (`None`: there is no Config any more).
    pub fn after(mut self, revision: Option<&str>) -> Self {
        self.after_revision = revision.map(str::to_owned);
        self
    }
}
