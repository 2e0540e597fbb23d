//! The in-memory queue engine: the Redis engine's semantics in one process (the embedded default).
//!
//! Each function mirrors the Lua script of the same name in `lua/`; the conformance suite runs
//! the same tests against both.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use tokio::sync::Notify;

use super::{
    Ack, Counts, DeadSelection, Engine, KEEP_RUNS, Leased, PushItem, PushOutcome, QueueError, QueueSpec, Rec,
    Resolution, RunRec, Taken, TaskStatus, Waiter, WorkerId,
};

/// Same bound as the Redis engine's.
const CHUNK: usize = 500;
const TRIM_CHUNK: usize = 200;

/// In-memory engine; clones share the same queues.
#[derive(Debug, Clone, Default)]
pub struct MemoryEngine {
    queues: Arc<Mutex<HashMap<String, Queue>>>,
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
    fn remove(&mut self, id: &str) -> bool {
        match self.score.remove(id) {
            Some(s) => self.order.remove(&(s, id.to_owned())),
            None => false,
        }
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

#[derive(Debug, Default)]
struct Queue {
    seq: u64,
    ready: VecDeque<String>,
    delayed: ZSet,
    leased: ZSet,
    dead: ZSet,
    finished: ZSet,
    rec: HashMap<String, Rec>,
    data: HashMap<String, String>,
    keys: HashMap<String, String>,
    stats: Counts,
    notify: Arc<Notify>,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// One call's view: the queue, its policy and the time the call started (as a script sees it).
struct Op<'a> {
    q: &'a mut Queue,
    spec: &'a QueueSpec,
    now: u64,
}

impl Op<'_> {
    fn enqueue(&mut self, id: &str, due: u64) {
        if due <= self.now {
            self.q.ready.push_back(id.to_owned());
            self.q.notify.notify_one();
        } else {
            self.q.delayed.add(due, id);
        }
    }

    fn new_task(&mut self, key: &str, payload: String, due: u64) -> String {
        self.q.seq += 1;
        let id = self.q.seq.to_string();
        let deadline = self.spec.policy.deadline.as_millis() as u64;
        let rec = Rec {
            k: key.to_owned(),
            s: "pending".into(),
            r: None,
            a: 0,
            m: self.spec.policy.max_attempts,
            c: self.now,
            d: if deadline > 0 { self.now + deadline } else { 0 },
            due,
            tok: None,
            e: None,
            runs: Vec::new(),
            fu: None,
            done: None,
        };
        self.q.keys.insert(key.to_owned(), id.clone());
        self.q.data.insert(id.clone(), payload);
        self.q.rec.insert(id.clone(), rec);
        self.enqueue(&id, due);
        self.q.stats.pushed += 1;
        id
    }

    fn merge_follow_up(&mut self, id: &str, rec: &mut Rec) {
        if let Some(fu) = rec.fu.take() {
            if let Some(payload) = self.q.data.remove(&format!("{id}:f")) {
                self.q.data.insert(id.to_owned(), payload);
            }
            rec.due = rec.due.min(fu);
        }
    }

    fn close_run(&self, rec: &mut Rec, outcome: &str) {
        if let Some(run) = rec.runs.last_mut() {
            run.e = Some(self.now);
            run.o = Some(outcome.to_owned());
        }
    }

    fn resolve(&mut self, id: &str, mut rec: Rec, state: &str, reason: Option<&str>) {
        rec.s = state.to_owned();
        rec.r = reason.map(str::to_owned);
        rec.done = Some(self.now);
        rec.tok = None;
        if self.q.keys.get(&rec.k).map(String::as_str) == Some(id) {
            self.q.keys.remove(&rec.k);
        }
        let fu = rec.fu.take();
        if state == "failed" {
            self.q.dead.add(self.now, id);
            self.q.stats.failed += 1;
        } else {
            self.q.data.remove(id);
            self.q.finished.add(self.now, id);
            self.q.stats.done += 1;
        }
        let key = rec.k.clone();
        self.q.rec.insert(id.to_owned(), rec);
        if let Some(fu) = fu
            && let Some(payload) = self.q.data.remove(&format!("{id}:f"))
        {
            self.new_task(&key, payload, fu);
        }
    }

    fn drop_ids(&mut self, ids: Vec<String>, dead: bool) {
        for id in ids {
            if dead {
                self.q.dead.remove(&id);
                self.q.data.remove(&id);
            } else {
                self.q.finished.remove(&id);
            }
            self.q.rec.remove(&id);
        }
    }

    fn trim(&mut self) {
        let p = &self.spec.policy;
        let over = self.q.finished.len().saturating_sub(p.keep_finished) as usize;
        let old = self.q.finished.oldest(over.min(TRIM_CHUNK));
        self.drop_ids(old, false);
        let cutoff = self.now.saturating_sub(p.keep_finished_for.as_millis() as u64);
        let aged = self.q.finished.up_to(cutoff, TRIM_CHUNK);
        self.drop_ids(aged, false);
        let over = self.q.dead.len().saturating_sub(p.keep_dead) as usize;
        let old = self.q.dead.oldest(over.min(TRIM_CHUNK));
        self.drop_ids(old, true);
    }

    fn running(&mut self, id: &str, token: Option<&str>) -> Option<Rec> {
        let rec = self.q.rec.get(id)?;
        (rec.s == "running" && token.is_none_or(|t| rec.tok.as_deref() == Some(t))).then(|| rec.clone())
    }
}

impl MemoryEngine {
    /// An empty engine.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Queue>> {
        // A panic while holding the lock leaves consistent data (every op finishes its writes
        // before returning), so a poisoned lock is safe to reuse.
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with<T>(&self, spec: &QueueSpec, f: impl FnOnce(&mut Op<'_>) -> T) -> T {
        let mut queues = self.lock();
        let q = queues.entry(spec.name.clone()).or_default();
        f(&mut Op { q, spec, now: now_ms() })
    }
}

#[async_trait]
impl Engine for MemoryEngine {
    async fn push(&self, q: &QueueSpec, items: &[PushItem]) -> Result<Vec<PushOutcome>, QueueError> {
        Ok(self.with(q, |op| {
            items
                .iter()
                .map(|it| {
                    let live = op.q.keys.get(&it.key).cloned();
                    let state = live.as_ref().and_then(|id| op.q.rec.get(id)).map(|r| (r.s.clone(), r.fu));
                    match (live, state) {
                        (Some(id), Some((s, fu))) if s == "running" => {
                            if fu.is_some() {
                                PushOutcome::FollowUpAlreadyPending(id)
                            } else {
                                let due = op.now + it.delay_ms;
                                op.q.rec.get_mut(&id).expect("checked").fu = Some(due);
                                op.q.data.insert(format!("{id}:f"), it.payload.clone());
                                PushOutcome::FollowUp(id)
                            }
                        }
                        (Some(id), Some((s, _))) if s == "pending" => PushOutcome::AlreadyPending(id),
                        _ => {
                            let due = op.now + it.delay_ms;
                            PushOutcome::Enqueued(op.new_task(&it.key, it.payload.clone(), due))
                        }
                    }
                })
                .collect()
        }))
    }

    async fn take(&self, q: &QueueSpec, worker: &WorkerId, max: usize) -> Result<Taken, QueueError> {
        Ok(self.with(q, |op| {
            for id in op.q.delayed.up_to(op.now, CHUNK) {
                op.q.delayed.remove(&id);
                op.q.ready.push_back(id);
            }
            for id in op.q.leased.up_to(op.now, CHUNK) {
                op.q.leased.remove(&id);
                let Some(mut rec) = op.running(&id, None) else { continue };
                op.close_run(&mut rec, "lease-expired");
                rec.tok = None;
                rec.e = Some("lease expired".into());
                op.q.stats.expired += 1;
                if rec.a >= rec.m {
                    op.resolve(&id, rec, "failed", Some("lease-expired"));
                } else {
                    rec.s = "pending".into();
                    rec.due = op.now;
                    op.merge_follow_up(&id, &mut rec);
                    op.q.rec.insert(id.clone(), rec);
                    op.q.ready.push_front(id);
                }
            }
            let mut tasks = Vec::new();
            let lease = op.spec.policy.lease.as_millis() as u64;
            for _ in 0..max {
                let Some(id) = op.q.ready.pop_front() else { break };
                let Some(mut rec) = op.q.rec.get(&id).filter(|r| r.s == "pending").cloned() else {
                    continue;
                };
                if rec.d > 0 && rec.d <= op.now {
                    rec.e = Some("deadline exceeded".into());
                    op.resolve(&id, rec, "failed", Some("deadline-exceeded"));
                    continue;
                }
                rec.s = "running".into();
                rec.a += 1;
                let token = format!("{}:{}:{}", worker.id, id, rec.a);
                rec.tok = Some(token.clone());
                rec.runs.push(RunRec {
                    n: rec.a,
                    w: worker.id.clone(),
                    g: worker.group.clone(),
                    s: op.now,
                    e: None,
                    o: None,
                });
                if rec.runs.len() > KEEP_RUNS {
                    rec.runs.remove(0);
                }
                op.q.leased.add(op.now + lease, &id);
                tasks.push(Leased {
                    id: id.clone(),
                    key: rec.k.clone(),
                    token,
                    attempt: rec.a,
                    payload: op.q.data.get(&id).cloned().unwrap_or_default(),
                });
                op.q.rec.insert(id, rec);
            }
            let next = [op.q.delayed.first_score(), op.q.leased.first_score()]
                .into_iter()
                .flatten()
                .min()
                .map(|t| Duration::from_millis(t.saturating_sub(op.now)));
            Taken { tasks, next_due: next }
        }))
    }

    fn waiter(&self, q: &QueueSpec) -> Box<dyn Waiter> {
        let notify = self.with(q, |op| op.q.notify.clone());
        Box::new(MemoryWaiter { notify })
    }

    async fn renew(&self, q: &QueueSpec, leases: &[(String, String)]) -> Result<Vec<String>, QueueError> {
        Ok(self.with(q, |op| {
            let until = op.now + op.spec.policy.lease.as_millis() as u64;
            leases
                .iter()
                .filter_map(|(id, token)| match op.running(id, Some(token)) {
                    Some(_) => {
                        op.q.leased.add(until, id);
                        None
                    }
                    None => Some(id.clone()),
                })
                .collect()
        }))
    }

    async fn finish(&self, q: &QueueSpec, acks: &[Ack]) -> Result<u64, QueueError> {
        Ok(self.with(q, |op| {
            let mut stale = 0;
            for ack in acks {
                let Some(mut rec) = op.running(&ack.id, Some(&ack.token)) else {
                    stale += 1;
                    continue;
                };
                let id = ack.id.as_str();
                op.q.leased.remove(id);
                rec.tok = None;
                match &ack.resolution {
                    Resolution::Release => {
                        rec.runs.pop();
                        rec.a -= 1;
                        rec.s = "pending".into();
                        rec.due = op.now;
                        op.merge_follow_up(id, &mut rec);
                        op.q.rec.insert(id.to_owned(), rec);
                        op.q.ready.push_front(id.to_owned());
                        op.q.notify.notify_one();
                    }
                    Resolution::Done => {
                        op.close_run(&mut rec, "done");
                        op.resolve(id, rec, "completed", None);
                    }
                    Resolution::Fail { error } => {
                        op.close_run(&mut rec, "fail");
                        rec.e = Some(error.clone());
                        op.resolve(id, rec, "failed", Some("permanent"));
                    }
                    Resolution::Retry { after, error } => {
                        op.close_run(&mut rec, "retry");
                        rec.e = Some(error.clone());
                        if rec.a >= rec.m {
                            op.resolve(id, rec, "failed", Some("retries-exhausted"));
                        } else {
                            rec.s = "pending".into();
                            rec.due = op.now + after.as_millis() as u64;
                            op.q.stats.retried += 1;
                            op.merge_follow_up(id, &mut rec);
                            let due = rec.due;
                            op.q.rec.insert(id.to_owned(), rec);
                            op.enqueue(id, due);
                        }
                    }
                }
            }
            op.trim();
            stale
        }))
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
        Ok(self.with(q, |op| {
            let until = op.q.leased.score.get(id).copied();
            op.q.rec.get(id).map(|r| r.status(id, &q.name, until))
        }))
    }

    async fn live_id(&self, q: &QueueSpec, key: &str) -> Result<Option<String>, QueueError> {
        Ok(self.with(q, |op| op.q.keys.get(key).cloned()))
    }

    async fn dead(&self, q: &QueueSpec, limit: usize) -> Result<Vec<TaskStatus>, QueueError> {
        Ok(self.with(q, |op| {
            op.q.dead
                .order
                .iter()
                .rev()
                .take(limit)
                .filter_map(|(_, id)| op.q.rec.get(id).map(|r| r.status(id, &q.name, None)))
                .collect()
        }))
    }

    async fn retry_dead(&self, q: &QueueSpec, which: DeadSelection) -> Result<u64, QueueError> {
        Ok(self.with(q, |op| {
            let ids = match which {
                DeadSelection::One(id) => vec![id],
                DeadSelection::All => op.q.dead.oldest(usize::MAX),
            };
            let mut n = 0;
            for id in ids {
                if !op.q.dead.remove(&id) {
                    continue;
                }
                n += 1;
                let Some(mut rec) = op.q.rec.remove(&id) else {
                    op.q.data.remove(&id);
                    continue;
                };
                if op.q.keys.contains_key(&rec.k) {
                    rec.r = Some("superseded".into());
                    op.q.data.remove(&id);
                    op.q.finished.add(op.now, &id);
                    op.q.rec.insert(id, rec);
                } else {
                    rec.s = "pending".into();
                    rec.r = None;
                    rec.a = 0;
                    rec.done = None;
                    rec.e = None;
                    rec.due = op.now;
                    let deadline = op.spec.policy.deadline.as_millis() as u64;
                    if deadline > 0 {
                        rec.d = op.now + deadline;
                    }
                    op.q.keys.insert(rec.k.clone(), id.clone());
                    op.q.rec.insert(id.clone(), rec);
                    op.enqueue(&id, op.now);
                }
            }
            n
        }))
    }

    async fn purge_dead(&self, q: &QueueSpec) -> Result<u64, QueueError> {
        Ok(self.with(q, |op| {
            let ids = op.q.dead.oldest(usize::MAX);
            let n = ids.len() as u64;
            op.drop_ids(ids, true);
            n
        }))
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
