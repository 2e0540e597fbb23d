//! The API's own inputs and outputs (the records they carry are the service's: Config, its
//! status, VM views, task status).

use chrono::{DateTime, Utc};
use gce_backend_jobs::config::Config;
use gce_backend_jobs::model::{AuditEntry, ConfigStatus, FileError, Pause, VmView};
use gce_backend_queues::{Counts, TaskStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Config and its status.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ConfigEntry {
    /// The Config as in force.
    pub config: Config,
    /// The amount the service targets now (the operator's, clamped to the Config's bounds).
    pub amount: u32,
    /// Its status.
    pub status: ConfigStatus,
    /// Whether the caller may change it: set its amount, pause or resume it, recycle its VMs
    /// (an admin any Config, a writer those one of its groups owns).
    #[serde(default)]
    pub may_change: bool,
    /// What its Config file has that is not followed: a newer version not applied (why), or the
    /// file gone and the Config's deletion held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileError>,
}

/// One page of Configs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigList {
    /// The Configs, by prefix.
    pub configs: Vec<ConfigEntry>,
    /// The Config files not applied, and the deletions held, that the caller may read (on every
    /// page: the whole list).
    #[serde(default)]
    pub files: Vec<FileError>,
    /// Pass it back as `continuationToken` for the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_token: Option<String>,
}

/// `updateAmount`'s input.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AmountInput {
    /// The amount wanted (clamped to the Config's bounds at the time).
    pub amount: u32,
}

/// A pause's input.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseInput {
    /// Why (shown in status).
    #[serde(default)]
    pub reason: String,
}

/// The global pause.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GlobalPause {
    /// Set while every Config is paused.
    pub paused: Option<Pause>,
}

/// One page of VMs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmList {
    /// The VMs, by index.
    pub vms: Vec<VmView>,
    /// The ids the pool holds no VM under by choice: indexes let go below its highest wanted
    /// one when it shrank (idle VMs first, whatever their index), taken again first when it
    /// grows (docs/configs.md, "VM ids"). The same on every page.
    #[serde(default)]
    pub let_go: Vec<String>,
    /// For the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_token: Option<String>,
}

/// One VM and the tasks working on it now.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct VmDetail {
    /// The VM.
    pub vm: VmView,
    /// Its instance's status as Compute Engine reports it now (`RUNNING`, `TERMINATED`, …;
    /// `GONE` when Compute has no such instance); absent while it has none, or when Compute did
    /// not answer within a few seconds.
    pub instance_status: Option<String>,
    /// Its pending or running tasks, one per queue that has one.
    pub tasks: Vec<TaskStatus>,
}

/// One page of an audit trail, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditList {
    /// The entries, newest first.
    pub entries: Vec<AuditEntry>,
    /// For the next page; absent on the last. (Entries recorded meanwhile push older ones
    /// down: a page may repeat an entry of the one before.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_token: Option<String>,
}

/// A queue and its counts.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueEntry {
    /// Queue name.
    pub name: String,
    /// Its counts.
    pub counts: Counts,
}

/// Every queue.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueList {
    /// The queues, in pipeline order.
    pub queues: Vec<QueueEntry>,
}

/// A task as the queue methods answer it: its status, the Config it belongs to and what the
/// caller may do with it (decided here, so the dashboard decides neither).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TaskEntry {
    /// The task's status.
    #[serde(flatten)]
    pub status: TaskStatus,
    /// The Config the task works for, by the one rule (its queue and key: a prefix, a VM id or
    /// `<VM id>@<guard>`); null for a task of no one Config (a project, zone or server).
    pub config: Option<String>,
    /// Whether the caller may retry it once it is dead: an admin any task, a writer the tasks
    /// of the Configs its groups own.
    pub may_retry: bool,
}

/// One page of tasks.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskList {
    /// The tasks.
    pub tasks: Vec<TaskEntry>,
    /// For the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_token: Option<String>,
}

/// How many tasks an action touched.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Affected {
    /// The count.
    pub count: u64,
}

/// `whoami`'s answer: who the presented token stands for.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct WhoAmI {
    /// The token's name.
    pub name: String,
    /// Its role: `reader`, `writer` or `admin`.
    pub role: super::auth::Role,
    /// Its groups, matched against a Config's `owner`.
    pub groups: Vec<String>,
    /// What its role lets it do (by the role order: reader, writer, admin).
    pub may: May,
}

/// What a caller's role lets it do, each decided by [`super::auth::Role::grants`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct May {
    /// Read Configs (of its groups, or without owner), VMs and queues.
    pub read: bool,
    /// Change the Configs its groups own, recycle their VMs, retry their dead tasks.
    pub write: bool,
    /// Everything: every Config, the global pause, queue-wide retries and purges.
    pub admin: bool,
}

impl From<super::auth::Role> for May {
    fn from(role: super::auth::Role) -> Self {
        use super::auth::Role;
        May {
            read: role.grants(Role::Reader),
            write: role.grants(Role::Writer),
            admin: role.grants(Role::Admin),
        }
    }
}

/// A Config's last hour (`configSeries`): one point a minute, oldest first, sampled by the
/// `sample_series` cron job (absent minutes: it did not run).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ConfigSeries {
    /// The Config.
    pub prefix: String,
    /// The points.
    pub points: Vec<ConfigPoint>,
}

/// A Config at one minute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigPoint {
    /// The minute.
    pub at: DateTime<Utc>,
    /// VMs with an instance.
    pub created: u64,
    /// VMs whose bot connected.
    pub connected: u64,
    /// The amount it targeted.
    pub amount: u64,
}

/// Every queue's last hour (`queueSeries`), in pipeline order.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueSeriesList {
    /// The queues.
    pub queues: Vec<QueueSeries>,
}

/// A queue's last hour: one point a minute, oldest first (absent minutes: not sampled).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueSeries {
    /// Queue name.
    pub name: String,
    /// The points.
    pub points: Vec<QueuePoint>,
}

/// A queue at one minute: what happened since the point before, and what waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QueuePoint {
    /// The minute.
    pub at: DateTime<Utc>,
    /// Failed runs scheduled again since the point before.
    pub retries: u64,
    /// Tasks that went to the dead set since the point before.
    pub failures: u64,
    /// Tasks pending or delayed at that minute.
    pub waiting: u64,
}

/// Paging parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Page {
    /// Opaque token from the previous page.
    pub continuation_token: Option<String>,
    /// Page size (1 to 1000; default 100).
    pub limit: Option<String>,
    /// VM state filter (listVms only).
    pub state: Option<String>,
}

impl Page {
    /// The largest page asked for (`limit`).
    pub const LIMIT_MAX: usize = 1000;
    /// The page size when none is asked for.
    pub const LIMIT_DEFAULT: usize = 100;
    /// Deepest an offset-paged listing (tasks, audit trails) pages.
    pub const MAX_OFFSET: usize = 100_000;

    /// The offset the continuation token of an offset-paged listing stands for (its tokens are
    /// offsets into the list).
    pub fn offset(&self) -> Result<usize, super::error::ApiError> {
        match &self.continuation_token {
            None => Ok(0),
            Some(t) => match t.parse::<usize>() {
                Ok(n) if n <= Self::MAX_OFFSET => Ok(n),
                _ => Err(super::error::ApiError::invalid(format!(
                    "continuationToken {t:?} is not one this API gave"
                ))),
            },
        }
    }

    /// Cuts `items` (read from `offset`, one more than `limit` when there are more) to the
    /// page and gives its continuation token: the next offset, or none on the last page and
    /// at [`Page::MAX_OFFSET`].
    pub fn cut<T>(items: &mut Vec<T>, offset: usize, limit: usize) -> Option<String> {
        let more = items.len() > limit && offset + limit < Self::MAX_OFFSET;
        items.truncate(limit);
        more.then(|| (offset + limit).to_string())
    }

    /// The page size asked, checked.
    pub fn limit(&self) -> Result<usize, super::error::ApiError> {
        match self.limit.as_deref() {
            None => Ok(Self::LIMIT_DEFAULT),
            Some(s) => match s.parse::<usize>() {
                Ok(n @ 1..=Self::LIMIT_MAX) => Ok(n),
                _ => Err(super::error::ApiError::invalid(format!(
                    "limit {s:?}: must be 1 to {}",
                    Self::LIMIT_MAX
                ))),
            },
        }
    }
}
