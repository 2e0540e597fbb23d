//! `TaskError`: what a handler can fail with, and its one classification.

use gce_backend_queues::QueueError;

use crate::ports::bots::{BotError, BotErrorKind};
use crate::ports::compute::{ComputeError, Kind};
use crate::ports::store::StoreError;

/// How a failed task is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Retry with the queue's backoff.
    Transient,
    /// Do not retry: the cron will re-derive the work if it is still wanted.
    Permanent,
}

/// A handler failure.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The datastore failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A compare-and-set lost a race; re-reading and retrying resolves it.
    #[error("record {0} changed under us")]
    Conflict(String),
    /// Compute Engine failed.
    #[error(transparent)]
    Compute(#[from] ComputeError),
    /// Swarming failed.
    #[error(transparent)]
    Bots(#[from] BotError),
    /// The queue failed.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The payload names nothing valid.
    #[error("invalid task: {0}")]
    Invalid(String),
    /// A provider cannot be used: not declared (permanent), or not set up yet (transient).
    #[error("provider {id}: {message}")]
    Provider {
        /// Its id.
        id: String,
        /// Why.
        message: String,
        /// Whether trying again may succeed.
        transient: bool,
    },
}

/// How long a task that met an index being rebuilt waits before it looks again.
pub const HEALING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl TaskError {
    /// When a call was held back, not sent — its project's rate limit is used up, the breaker
    /// of its project or server is open, or an index it reads is being rebuilt: how long until it may go (the task is looked
    /// at again then; not a failure, no attempt counted).
    pub fn throttled(&self) -> Option<std::time::Duration> {
        match self {
            TaskError::Compute(e) => e.retry_after,
            TaskError::Bots(e) => e.retry_after,
            // A derived key being rebuilt: the next count_vms tick rebuilds it.
            TaskError::Store(crate::ports::store::StoreError::Healing { .. }) => Some(HEALING_WAIT),
            _ => None,
        }
    }

    /// The single classification point.
    pub fn class(&self) -> Class {
        match self {
            TaskError::Queue(e) if !e.is_transient() => Class::Permanent,
            // A record or key that does not decode will not by retrying: the task dies once (its
            // Config's status says why) and the cron pushes it again after the repair.
            TaskError::Store(crate::ports::store::StoreError::Corrupt { .. }) => Class::Permanent,
            // A newer build's record will not become readable by retrying (a task that meets it
            // ends without acting: `tasks::left_alone`).
            TaskError::Store(crate::ports::store::StoreError::Newer { .. }) => Class::Permanent,
            TaskError::Store(_) | TaskError::Conflict(_) | TaskError::Queue(_) => Class::Transient,
            TaskError::Compute(e) => match e.kind {
                Kind::Transient | Kind::RateLimited | Kind::Quota | Kind::Stockout | Kind::Throttled => {
                    Class::Transient
                }
                Kind::NotFound | Kind::AlreadyExists | Kind::Invalid => Class::Permanent,
            },
            TaskError::Bots(e) => match e.kind {
                BotErrorKind::Unavailable | BotErrorKind::RateLimited => Class::Transient,
                BotErrorKind::NotFound | BotErrorKind::Denied | BotErrorKind::Invalid => Class::Permanent,
            },
            TaskError::Invalid(_) => Class::Permanent,
            TaskError::Provider { transient: true, .. } => Class::Transient,
            TaskError::Provider { transient: false, .. } => Class::Permanent,
        }
    }
}
