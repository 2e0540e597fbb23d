//! The in-memory queue engine: the Redis engine's semantics in one process (the embedded default).
//!
//! Each function mirrors the Lua script of the same name in `lua/`: `script.rs` holds the
//! helpers of `prelude.lua`, `ops.rs` one function per script. The conformance suite runs the
//! same tests against both engines.

mod ops;
mod script;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::record::unreadable;
use super::{
    Ack, Counts, DeadSelection, Engine, PushItem, PushOutcome, QueueError, QueueSpec, Rec, Taken, TaskStatus,
    Waiter, WorkerId,
};
use crate::clock::{self, Clock};

/// Same bound as the Redis engine's.
const CHUNK: usize = 500;
const TRIM_CHUNK: usize = 200;

/// In-memory engine; clones share the same queues.
#[derive(Debug, Clone)]
pub struct MemoryEngine {
    queues: Arc<Mutex<HashMap<String, Queue>>>,
    clock: Arc<dyn Clock>,
}

impl Default for MemoryEngine {
    fn default() -> Self {
        Self::with_clock(clock::system())
    }
}

/// A sorted set: id → score, ordered by score then id (Redis ZSET semantics).
#[derive(Debug, Default)]
struct ZSet {
    order: BTreeSet<(u64, String)>,
    score: HashMap<String, u64>,
}

impl ZSet {
    fn add(&mut self, score: u64, id: &str) {
        self.remove(id);
        self.order.insert((score, id.to_owned()));
        self.score.insert(id.to_owned(), score);
    }
    /// Adds `id` unless it is there already (`ZADD NX`); true when added.
    fn add_new(&mut self, score: u64, id: &str) -> bool {
        if self.score.contains_key(id) {
            return false;
        }
        self.add(score, id);
        true
    }
    fn remove(&mut self, id: &str) -> bool {
        match self.score.remove(id) {
            Some(s) => self.order.remove(&(s, id.to_owned())),
            None => false,
        }
    }
    fn contains(&self, id: &str) -> bool {
        self.score.contains_key(id)
    }
    fn up_to(&self, max: u64, limit: usize) -> Vec<String> {
        self.order.iter().take_while(|(s, _)| *s <= max).take(limit).map(|(_, id)| id.clone()).collect()
    }
    fn oldest(&self, n: usize) -> Vec<String> {
        self.order.iter().take(n).map(|(_, id)| id.clone()).collect()
    }
    fn first_score(&self) -> Option<u64> {
        self.order.first().map(|(s, _)| *s)
    }
    fn len(&self) -> u64 {
        self.order.len() as u64
    }
}

/// A stored task record: decoded, or text the engine cannot read (as a raw value in Redis's `rec`
/// hash would be), which the first call that meets it buries.
#[derive(Debug, Clone)]
enum Stored {
    Rec(Rec),
    /// Only planted by tests: nothing else writes undecodable records in memory.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    Raw(String),
}

#[derive(Debug, Default)]
struct Queue {
    ready: VecDeque<String>,
    delayed: ZSet,
    leased: ZSet,
    dead: ZSet,
    finished: ZSet,
    rec: HashMap<String, Stored>,
    data: HashMap<String, String>,
    keys: HashMap<String, String>,
    stats: Counts,
    notify: Arc<Notify>,
}

/// One call's view: the queue, its policy and the time the call started (as a script sees it).
struct Op<'a> {
    q: &'a mut Queue,
    spec: &'a QueueSpec,
    now: u64,
}

impl MemoryEngine {
    /// An empty engine on the system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty engine that reads the time (due times, leases, run records) from `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self { queues: Arc::default(), clock }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Queue>> {
        // A panic while holding the lock leaves consistent data (every op finishes its writes
        // before returning), so a poisoned lock is safe to reuse.
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with<T>(&self, spec: &QueueSpec, f: impl FnOnce(&mut Op<'_>) -> T) -> T {
        let mut queues = self.lock();
        let q = queues.entry(spec.name.clone()).or_default();
        f(&mut Op { q, spec, now: self.clock.now_ms() })
    }

    /// Test support: stores `raw` as task `id`'s record text, as a raw `HSET` on the Redis `rec`
    /// hash would. Text that does not decode as a record stays unread until a call meets it.
    #[cfg(feature = "testing")]
    pub fn plant_record(&self, q: &QueueSpec, id: &str, raw: &str) {
        let stored = match super::record::decode(raw) {
            Some(rec) => Stored::Rec(rec),
            None => Stored::Raw(raw.to_owned()),
        };
        self.with(q, |op| op.q.rec.insert(id.to_owned(), stored));
    }

    /// Test support: points `key` at task `id` in the key map, as a raw `HSET` on the Redis
    /// `keys` hash would, whether or not that task exists.
    #[cfg(feature = "testing")]
    pub fn plant_key(&self, q: &QueueSpec, key: &str, id: &str) {
        self.with(q, |op| op.q.keys.insert(key.to_owned(), id.to_owned()));
    }
}

#[async_trait]
impl Engine for MemoryEngine {
    async fn push(&self, q: &QueueSpec, items: &[PushItem]) -> Result<Vec<PushOutcome>, QueueError> {
        Ok(self.with(q, |op| op.push(items)))
    }

    async fn take(&self, q: &QueueSpec, worker: &WorkerId, max: usize) -> Result<Taken, QueueError> {
        Ok(self.with(q, |op| op.take(worker, max)))
    }

    fn waiter(&self, q: &QueueSpec) -> Box<dyn Waiter> {
        let notify = self.with(q, |op| op.q.notify.clone());
        Box::new(MemoryWaiter { notify })
    }

    async fn renew(&self, q: &QueueSpec, leases: &[(String, String)]) -> Result<Vec<String>, QueueError> {
        Ok(self.with(q, |op| op.renew(leases)))
    }

    async fn finish(&self, q: &QueueSpec, acks: &[Ack]) -> Result<u64, QueueError> {
        Ok(self.with(q, |op| op.finish(acks)))
    }

    async fn counts(&self, q: &QueueSpec) -> Result<Counts, QueueError> {
        Ok(self.with(q, |op| Counts {
            pending: op.q.ready.len() as u64,
            delayed: op.q.delayed.len(),
            running: op.q.leased.len(),
            dead: op.q.dead.len(),
            ..op.q.stats.clone()
        }))
    }

    async fn status(&self, q: &QueueSpec, id: &str) -> Result<Option<TaskStatus>, QueueError> {
        self.with(q, |op| {
            let until = op.q.leased.score.get(id).copied();
            match op.q.rec.get(id) {
                None => Ok(None),
                Some(Stored::Rec(r)) => Ok(Some(r.status(id, &q.name, until))),
                Some(Stored::Raw(raw)) => Err(unreadable(id, raw)),
            }
        })
    }

    async fn live_id(&self, q: &QueueSpec, key: &str) -> Result<Option<String>, QueueError> {
        Ok(self.with(q, |op| op.q.keys.get(key).cloned()))
    }

    async fn dead(&self, q: &QueueSpec, limit: usize) -> Result<Vec<TaskStatus>, QueueError> {
        Ok(self.with(q, |op| {
            let ids: Vec<String> =
                op.q.dead.order.iter().rev().take(limit).map(|(_, id)| id.clone()).collect();
            op.views(ids, "failed")
        }))
    }

    async fn retry_dead(&self, q: &QueueSpec, which: DeadSelection) -> Result<u64, QueueError> {
        Ok(self.with(q, |op| op.retry_dead(which)))
    }

    async fn purge_dead(&self, q: &QueueSpec) -> Result<u64, QueueError> {
        Ok(self.with(q, |op| {
            let ids = op.q.dead.oldest(usize::MAX);
            let n = ids.len() as u64;
            op.drop_ids(ids, true);
            n
        }))
    }

    async fn pending(
        &self,
        q: &QueueSpec,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<TaskStatus>, QueueError> {
        Ok(self.with(q, |op| {
            let ids: Vec<String> = op.q.ready.iter().skip(offset).take(limit).cloned().collect();
            op.views(ids, "pending")
        }))
    }

    async fn delayed(
        &self,
        q: &QueueSpec,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<TaskStatus>, QueueError> {
        Ok(self.with(q, |op| {
            let ids: Vec<String> =
                op.q.delayed.order.iter().skip(offset).take(limit).map(|(_, id)| id.clone()).collect();
            op.views(ids, "pending")
        }))
    }

    async fn purge_pending(&self, q: &QueueSpec) -> Result<u64, QueueError> {
        // As the Redis engine: chunk by chunk (the lock is let go in between), bounded by what was
        // pending when the call started.
        let mut left = self.with(q, |op| op.q.ready.len() as u64 + op.q.delayed.len());
        let mut dropped = 0;
        while left > 0 {
            let (n, touched) = self.with(q, |op| op.purge_chunk(CHUNK));
            dropped += n;
            if touched == 0 {
                break;
            }
            left = left.saturating_sub(touched);
        }
        Ok(dropped)
    }
}

struct MemoryWaiter {
    notify: Arc<Notify>,
}

#[async_trait]
impl Waiter for MemoryWaiter {
    async fn wait(&mut self, timeout: Duration) -> Result<(), QueueError> {
        let _ = tokio::time::timeout(timeout, self.notify.notified()).await;
        Ok(())
    }
}
