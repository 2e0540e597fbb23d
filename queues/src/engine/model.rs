//! The records that cross the engine contract: a queue's spec, pushes and their outcomes, leased
//! tasks, how runs end (resolutions and acks), counts, task statuses, and the queue layer's error.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::policy::Policy;

/// Errors of the queue layer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum QueueError {
    /// Redis could not be reached or answered with an error; worth retrying.
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// A stored record or a reply could not be decoded.
    #[error("corrupt queue data: {0}")]
    Corrupt(String),
    /// The caller passed something the queue cannot hold.
    #[error("invalid request: {0}")]
    Invalid(String),
}

impl QueueError {
    /// True when retrying the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, QueueError::Redis(_))
    }
}

/// When a pushed task becomes due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum When {
    /// At once.
    #[default]
    Now,
    /// After this delay.
    After(Duration),
    /// At this time (a time in the past means at once).
    At(DateTime<Utc>),
    /// At once, and the key's task that waits for a later look (pushed with a delay, or put
    /// back with `Again`; not one waiting out a retry's backoff) is brought forward to now, as
    /// is a running task's later follow-up (which, as any follow-up, becomes due when the run
    /// ends, whatever its outcome): something happened that it should see.
    Hurry,
}

impl When {
    /// The delay in milliseconds from `now`.
    pub fn delay_ms(self, now: DateTime<Utc>) -> u64 {
        match self {
            When::Now | When::Hurry => 0,
            When::After(d) => d.as_millis() as u64,
            When::At(t) => (t - now).num_milliseconds().max(0) as u64,
        }
    }
}

/// One task to push: its key, its JSON payload and when it is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushItem {
    /// Caller-chosen key; at most one pending task per key.
    pub key: String,
    /// JSON payload.
    pub payload: String,
    /// Delay in milliseconds.
    pub delay_ms: u64,
    /// [`When::Hurry`]: bring the key's waiting task forward.
    pub hurry: bool,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "task_id")]
pub enum PushOutcome {
    /// A new pending task was created.
    Enqueued(String),
    /// A task for this key was already pending: nothing changed.
    AlreadyPending(String),
    /// The key's task is running: the push was kept as its follow-up.
    FollowUp(String),
    /// The key's task is running and already has a follow-up: nothing changed.
    FollowUpAlreadyPending(String),
}

impl PushOutcome {
    /// The id of the task the push landed on.
    pub fn task_id(&self) -> &str {
        match self {
            PushOutcome::Enqueued(id)
            | PushOutcome::AlreadyPending(id)
            | PushOutcome::FollowUp(id)
            | PushOutcome::FollowUpAlreadyPending(id) => id,
        }
    }

    /// True when the push added work (a new task or a follow-up).
    pub fn added(&self) -> bool {
        matches!(self, PushOutcome::Enqueued(_) | PushOutcome::FollowUp(_))
    }
}

/// Who runs a task: recorded in each run of the task status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerId {
    /// Group of workers, e.g. the host.
    pub group: String,
    /// This worker within the group.
    pub id: String,
}

/// A task taken under a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    /// Task id.
    pub id: String,
    /// The key it was pushed under.
    pub key: String,
    /// Proof of this lease; acks and renewals with another token are refused.
    pub token: String,
    /// Runs so far, this one included.
    pub attempt: u32,
    /// JSON payload.
    pub payload: String,
    /// How long it waited from when it was due until this take, in milliseconds.
    pub waited_ms: u64,
}

/// Result of one take.
#[derive(Debug, Clone, Default)]
pub struct Taken {
    /// Tasks now leased to the caller.
    pub tasks: Vec<Leased>,
    /// Time until the next delayed task or lease expiry, if any.
    pub next_due: Option<Duration>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Completed.
    Done,
    /// Failed; run again after the delay unless attempts are used up.
    Retry {
        /// Delay before the next run.
        after: Duration,
        /// Why it failed.
        error: String,
    },
    /// Failed for good: straight to the dead set.
    Fail {
        /// Why it failed.
        error: String,
    },
    /// Never started (shutdown): back to the head of the queue, attempt not counted.
    Release,
    /// Started, and cut short by its worker's stop running out of time: the run is closed as
    /// `handed-back`, the task goes back to the head of the queue for another worker, its
    /// attempt not counted (the stop is not the task's failure), a push meanwhile merged into it.
    /// Sent only once the run's handler is gone (dropped), so no other ack of that run follows.
    HandBack,
    /// The run made progress and asks to run again after the delay (work in progress: an
    /// operation to follow, a bot to look at again). The same task goes back to pending, its
    /// attempts start again and its deadline is renewed; a push that arrived during the run
    /// merges into it (the newer payload, the earlier due time).
    Again {
        /// Delay before the next run.
        after: Duration,
    },
}

/// The end of one leased run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// Task id.
    pub id: String,
    /// Lease token from [`Leased::token`].
    pub token: String,
    /// How the run ended.
    pub resolution: Resolution,
}

/// O(1) per-queue counts and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "QueueCounts")]
pub struct Counts {
    /// Due and waiting for a worker.
    pub pending: u64,
    /// Waiting for their time (pushed with a delay, or retrying).
    pub delayed: u64,
    /// Leased to a worker.
    pub running: u64,
    /// In the dead set.
    pub dead: u64,
    /// Completed runs, ever.
    pub done: u64,
    /// Tasks that went to the dead set, ever.
    pub failed: u64,
    /// Failed runs scheduled again, ever.
    pub retried: u64,
    /// Leases that ran out (worker died or hung), ever.
    pub expired: u64,
    /// Tasks created by pushes, ever.
    pub pushed: u64,
}

/// Which dead tasks to put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadSelection {
    /// One task by id.
    One(String),
    /// Every dead task.
    All,
}

/// The status of one task, shaped like the Taskcluster queue's task status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskStatus {
    /// Task id.
    pub task_id: String,
    /// Queue name.
    pub queue: String,
    /// Caller-chosen key.
    pub key: String,
    /// `pending`, `running`, `completed` or `failed`.
    pub state: String,
    /// Why it is in this state: `none`, `retries-exhausted`, `permanent`, `lease-expired`,
    /// `deadline-exceeded`, `superseded`.
    pub reason: String,
    /// Runs started so far.
    pub attempts: u32,
    /// Retries left.
    pub retries: u32,
    /// One entry per run.
    pub runs: Vec<RunStatus>,
    /// When it was pushed.
    pub created: DateTime<Utc>,
    /// When it fails if not resolved.
    pub deadline: Option<DateTime<Utc>>,
    /// While running: when the lease runs out.
    pub taken_until: Option<DateTime<Utc>>,
    /// While pending: when it is due.
    pub run_at: Option<DateTime<Utc>>,
    /// When it was resolved (completed or failed).
    pub resolved: Option<DateTime<Utc>>,
    /// The last error.
    pub last_error: Option<String>,
    /// True when a push arrived during the run and is waiting.
    pub follow_up: bool,
}

/// One run of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunStatus {
    /// 1 for the first run.
    pub run_id: u32,
    /// Group of the worker that ran it.
    pub worker_group: String,
    /// The worker that ran it.
    pub worker_id: String,
    /// When it started.
    pub started: DateTime<Utc>,
    /// When it ended.
    pub resolved: Option<DateTime<Utc>>,
    /// `done`, `retry`, `fail`, `again`, `lease-expired`, `handed-back`.
    pub outcome: Option<String>,
}

/// A queue's name and policy, as the engines see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    /// Queue name: `[a-z0-9_-]+`.
    pub name: String,
    /// Delivery policy.
    pub policy: Policy,
    /// How many partitions its tasks spread over, by key (1: none). Each partition of a Redis
    /// queue has keys of its own hash tag, so a busy queue spreads over a cluster's primaries.
    /// Part of the key layout, like the name: lowering it strands the tasks of the partitions
    /// dropped (until the cron jobs push again what is still wanted).
    pub partitions: u16,
}

impl QueueSpec {
    /// Checks the name and policy.
    pub fn new(name: &str, policy: Policy) -> Result<Self, QueueError> {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !valid {
            return Err(QueueError::Invalid(format!(
                "queue name {name:?}: must be 1-64 characters of [a-z0-9_-]"
            )));
        }
        policy.validate().map_err(|e| QueueError::Invalid(format!("queue {name}: {e}")))?;
        Ok(Self { name: name.to_owned(), policy, partitions: 1 })
    }

    /// The same queue spread over `n` partitions (1 to [`MAX_PARTITIONS`]).
    pub fn partitioned(mut self, n: u16) -> Result<Self, QueueError> {
        if !(1..=MAX_PARTITIONS).contains(&n) {
            return Err(QueueError::Invalid(format!(
                "queue {}: {n} partitions (1 to {MAX_PARTITIONS})",
                self.name
            )));
        }
        self.partitions = n;
        Ok(self)
    }
}

/// Most partitions a queue may have.
pub const MAX_PARTITIONS: u16 = 64;

#[cfg(test)]
mod tests;
