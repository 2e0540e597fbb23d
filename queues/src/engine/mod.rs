//! The contract both queue engines meet (Redis and in-memory), over the records in `model.rs`
//! and the stored task record they share (`record.rs`).
//!
//! A queue holds tasks under caller-chosen **keys**. Per (queue, key) there is at most one
//! *pending* task (queued or delayed); a push while one is pending is a no-op that says so, and
//! a push while the key's task is *running* is kept as one **follow-up** that becomes pending
//! when the run ends, so a change made during a run is never lost. A taken task is **leased**:
//! if its lease is not renewed it is delivered again, whoever held it. Failed runs are retried
//! with the queue's backoff until `max_attempts`, then the task goes to the **dead set**.
//!
//! Each task has an id the queue makes: 128 random bits as a 22-character slug ([`id`]).

pub mod id;
pub mod memory;
mod model;
mod record;
pub mod redis;

use std::fmt::Debug;
use std::time::Duration;

use async_trait::async_trait;

pub use id::new_task_id;
pub use model::{
    Ack, Counts, DeadSelection, Leased, MAX_PARTITIONS, PushItem, PushOutcome, QueueError, QueueSpec,
    Resolution, RunStatus, Taken, TaskStatus, When, WorkerId,
};
pub(crate) use record::{KEEP_RUNS, Rec, RunRec};

/// A queue engine: Redis in production, memory in the embedded default. Both pass the same
/// conformance suite (`queues/tests/conformance.rs`).
///
/// A stored record that cannot be read (not JSON, or lacking a field the engine needs) never
/// stops a call: the first call that meets it moves it to the dead set with reason `corrupt`,
/// replaced by a readable record that keeps the raw text in its `last_error`, and carries on
/// with the other tasks. Such a record counts as gone for [`Engine::finish`] (stale) and
/// [`Engine::renew`] (lost), a push on its key enqueues a new task, and
/// [`Engine::retry_dead`] leaves it dead ([`Engine::purge_dead`] drops it).
#[async_trait]
pub trait Engine: Send + Sync + Debug {
    /// Pushes tasks; one outcome per item, in order.
    async fn push(&self, q: &QueueSpec, items: &[PushItem]) -> Result<Vec<PushOutcome>, QueueError>;
    /// Moves due delayed tasks and expired leases back to the queue (in bounded chunks), then
    /// leases up to `max` due tasks to `worker`.
    async fn take(&self, q: &QueueSpec, worker: &WorkerId, max: usize) -> Result<Taken, QueueError>;
    /// A handle that blocks until work may be available.
    fn waiter(&self, q: &QueueSpec) -> Box<dyn Waiter>;
    /// Extends leases; returns the ids whose lease was lost (expired and re-delivered, or gone).
    async fn renew(&self, q: &QueueSpec, leases: &[(String, String)]) -> Result<Vec<String>, QueueError>;
    /// Records how runs ended; acks with a stale token are ignored and counted.
    async fn finish(&self, q: &QueueSpec, acks: &[Ack]) -> Result<u64, QueueError>;
    /// Counts and counters.
    async fn counts(&self, q: &QueueSpec) -> Result<Counts, QueueError>;
    /// One task's status, while it is live or kept after it finished.
    async fn status(&self, q: &QueueSpec, id: &str) -> Result<Option<TaskStatus>, QueueError>;
    /// The id of the key's live (pending or running) task.
    async fn live_id(&self, q: &QueueSpec, key: &str) -> Result<Option<String>, QueueError>;
    /// Dead tasks, newest first.
    async fn dead(&self, q: &QueueSpec, limit: usize) -> Result<Vec<TaskStatus>, QueueError>;
    /// Puts dead tasks back as pending with fresh attempts; returns how many.
    async fn retry_dead(&self, q: &QueueSpec, which: DeadSelection) -> Result<u64, QueueError>;
    /// Drops every dead task; returns how many.
    async fn purge_dead(&self, q: &QueueSpec) -> Result<u64, QueueError>;
    /// Due tasks in the order they will be taken: `limit` of them from position `offset`.
    async fn pending(
        &self,
        q: &QueueSpec,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<TaskStatus>, QueueError>;
    /// Delayed tasks (pushed with a delay, or waiting for a retry), soonest first: `limit` of them
    /// from position `offset`.
    async fn delayed(
        &self,
        q: &QueueSpec,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<TaskStatus>, QueueError>;
    /// Drops every pending task, due and delayed (record, payload and key entry, so the next push
    /// of the key enqueues a fresh task), in chunks of 500 per call; returns how many.
    ///
    /// Running tasks are untouched, and so are their follow-ups: a push that arrived during a run
    /// still becomes pending when the run ends. Tasks pushed while the purge runs may survive it.
    async fn purge_pending(&self, q: &QueueSpec) -> Result<u64, QueueError>;
}

/// Blocks a worker until work may be available.
#[async_trait]
pub trait Waiter: Send {
    /// Returns on a push notification or after `timeout`, whichever comes first.
    async fn wait(&mut self, timeout: Duration) -> Result<(), QueueError>;
}
