//! The Redis queue engine: one Lua function per operation, in a Redis Functions library (loaded
//! once, so a call does not rebuild the shared helpers), over keys that share a hash tag.
//!
//! Layout of queue `q` in deployment namespace `ns` (every key carries the hash tag `{ns:q}`, so
//! each script touches a single Redis Cluster slot):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{ns:q}:ready` | LIST | ids of due tasks, FIFO |
//! | `{ns:q}:delayed` | ZSET | id → due time (ms) |
//! | `{ns:q}:leased` | ZSET | id → lease deadline (ms) |
//! | `{ns:q}:dead` | ZSET | id → time it died |
//! | `{ns:q}:finished` | ZSET | id → time it completed (trimmed by count and age) |
//! | `{ns:q}:rec` | HASH | id → task record (JSON) |
//! | `{ns:q}:data` | HASH | id → payload; `id:f` → follow-up payload |
//! | `{ns:q}:keys` | HASH | key → id of its live task |
//! | `{ns:q}:stats` | HASH | counters: pushed, done, failed, retried, expired |
//! | `{ns:q}:signal` | LIST | wake-ups for blocked workers (capped) |
//!
//! Task ids are random ([`new_task_id`]), made here and passed to the scripts: one per pushed
//! item and one per ack (for the follow-up it may turn into a task), and on every call a fresh
//! seed from which a script derives ids for the tasks it makes without one (follow-ups of
//! expired or overdue leases, tasks of buried records). Queues from before random ids may hold
//! a `{ns:q}:seq` counter, now unused, and decimal ids, which stay valid.
//!
//! Time is the Redis server's (`TIME` inside the scripts), so processes with skewed clocks agree
//! on due times and lease deadlines.
//!
//! The library (`lua/prelude.lua`, then each operation's file as a function) is named after a
//! hash of its source, so processes of different builds sharing a Redis each call their own; it
//! is loaded by the first call that finds it missing (after a restart of a Redis that keeps no
//! functions, too). Redis 7.0 or later.

use std::collections::HashMap;
use std::time::Duration;

use redis::Value;

mod library;
mod parts;
mod waiter;

use super::record::{corrupt_status, decode, unreadable};
use super::{
    Ack, Counts, DeadSelection, Leased, PushItem, PushOutcome, QueueError, QueueSpec, Resolution, Taken,
    TaskStatus, Waiter, WorkerId, new_task_id,
};
use crate::link::{Link, LinkError};
use library::LIBRARY;
use waiter::RedisWaiter;

/// Ready tasks moved and expired leases reclaimed per take, and tasks purged or dead tasks handled
/// per call: bounded, so a backlog of any size moves in chunks and never blocks Redis for long.
const CHUNK: usize = 500;
/// Items per push script call.
const PUSH_CHUNK: usize = 1000;

/// Redis engine for one deployment namespace.
#[derive(Clone)]
pub struct RedisEngine {
    conn: Link,
    namespace: String,
}

impl std::fmt::Debug for RedisEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisEngine").field("namespace", &self.namespace).finish()
    }
}

impl RedisEngine {
    /// Connects to `url` (any `--redis` URL, e.g. `redis://127.0.0.1:6379/0`) for deployment
    /// `namespace`.
    ///
    /// The connection reconnects by itself; calls made while Redis is away fail with
    /// [`QueueError::Redis`], which workers retry with backoff.
    pub async fn connect(url: &str, namespace: &str) -> Result<Self, QueueError> {
        check_namespace(namespace)?;
        Self::on(Link::open(url).await?, namespace)
    }

    /// The engine of deployment `namespace` over an open link.
    pub fn on(link: Link, namespace: &str) -> Result<Self, QueueError> {
        check_namespace(namespace)?;
        Ok(Self { conn: link, namespace: namespace.to_owned() })
    }

    /// The namespace this engine works in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn key(&self, q: &QueueSpec, part: &str) -> String {
        format!("{{{}:{}}}:{}", self.namespace, q.name, part)
    }

    /// Calls operation `op` of the library with the queue's keys, its policy and a fresh id seed,
    /// then `args`; loads the library when Redis does not have it, and calls again.
    async fn call<T: redis::FromRedisValue>(
        &self,
        op: &str,
        q: &QueueSpec,
        args: impl FnOnce(&mut redis::Cmd),
    ) -> Result<T, QueueError> {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(format!("{}_{op}", LIBRARY.name)).arg(10);
        for part in
            ["ready", "delayed", "leased", "dead", "finished", "rec", "data", "keys", "stats", "signal"]
        {
            cmd.arg(self.key(q, part));
        }
        let p = &q.policy;
        cmd.arg(p.max_attempts)
            .arg(p.deadline.as_millis() as u64)
            .arg(p.lease.as_millis() as u64)
            .arg(p.keep_finished)
            .arg(p.keep_finished_for.as_millis() as u64)
            .arg(p.keep_dead)
            .arg(new_task_id());
        args(&mut cmd);
        let mut conn = self.conn.clone();
        match cmd.query_async(&mut conn).await {
            Err(e) if e.to_string().contains("Function not found") => {
                let () = redis::cmd("FUNCTION")
                    .arg("LOAD")
                    .arg("REPLACE")
                    .arg(&LIBRARY.source)
                    .query_async(&mut conn)
                    .await?;
                Ok(cmd.query_async(&mut conn).await?)
            }
            other => Ok(other?),
        }
    }

    /// The statuses of dead tasks `ids` (a record no call has read yet shows as corrupt).
    async fn records(&self, q: &QueueSpec, ids: &[String]) -> Result<Vec<TaskStatus>, QueueError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn.clone();
        let raws: Vec<Option<Vec<u8>>> =
            redis::cmd("HMGET").arg(self.key(q, "rec")).arg(ids).query_async(&mut conn).await?;
        Ok(ids
            .iter()
            .zip(raws)
            .filter_map(|(id, raw)| {
                raw.map(|raw| view(id, &q.name, "failed", &String::from_utf8_lossy(&raw)))
            })
            .collect())
    }

    /// A page of the ready list or the delayed set, read by one script.
    async fn list(
        &self,
        q: &QueueSpec,
        which: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<TaskStatus>, QueueError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let reply: Vec<Value> = self
            .call("list", q, |inv| {
                inv.arg(which).arg(offset).arg(limit);
            })
            .await?;
        let mut out = Vec::with_capacity(reply.len() / 2);
        for pair in reply.chunks(2) {
            let [id, raw] = pair else {
                return Err(QueueError::Corrupt("list reply".into()));
            };
            let raw = text(raw)?;
            if !raw.is_empty() {
                out.push(view(&text(id)?, &q.name, "pending", &raw));
            }
        }
        Ok(out)
    }
}

/// The status of a stored record; one no call has read (and buried) yet shows as corrupt, under
/// the `state` of the list it was found in.
fn view(id: &str, queue: &str, state: &str, raw: &str) -> TaskStatus {
    match decode(raw) {
        Some(rec) => rec.status(id, queue, None),
        None => corrupt_status(id, queue, state, raw),
    }
}

fn text(v: &Value) -> Result<String, QueueError> {
    match v {
        Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Int(i) => Ok(i.to_string()),
        other => Err(QueueError::Corrupt(format!("unexpected reply {other:?}"))),
    }
}

fn int(v: &Value) -> Result<i64, QueueError> {
    match v {
        Value::Int(i) => Ok(*i),
        other => {
            text(other)?.parse().map_err(|_| QueueError::Corrupt(format!("expected a number, got {other:?}")))
        }
    }
}

/// The operations on one partition (`parts.rs` routes a partitioned queue's calls to them, with
/// the partition's own spec: see [`RedisEngine::part`]).
impl RedisEngine {
    async fn push_one(&self, q: &QueueSpec, items: &[PushItem]) -> Result<Vec<PushOutcome>, QueueError> {
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(PUSH_CHUNK) {
            let reply: Vec<String> = self
                .call("push", q, |inv| {
                    for it in chunk {
                        inv.arg(&it.key)
                            .arg(&it.payload)
                            .arg(it.delay_ms)
                            .arg(new_task_id())
                            .arg(u8::from(it.hurry));
                    }
                })
                .await?;
            for pair in reply.chunks(2) {
                let [what, id] = pair else {
                    return Err(QueueError::Corrupt("push reply".into()));
                };
                let id = id.clone();
                out.push(match what.as_str() {
                    "enqueued" => PushOutcome::Enqueued(id),
                    "already_pending" => PushOutcome::AlreadyPending(id),
                    "follow_up" => PushOutcome::FollowUp(id),
                    _ => PushOutcome::FollowUpAlreadyPending(id),
                });
            }
        }
        Ok(out)
    }

    async fn take_one(&self, q: &QueueSpec, worker: &WorkerId, max: usize) -> Result<Taken, QueueError> {
        let reply: Vec<Value> = self
            .call("take", q, |inv| {
                inv.arg(max).arg(&worker.id).arg(&worker.group).arg(CHUNK);
            })
            .await?;
        let (first, rest) =
            reply.split_first().ok_or_else(|| QueueError::Corrupt("empty take reply".into()))?;
        let next = int(first)?;
        let mut tasks = Vec::with_capacity(rest.len() / 6);
        for t in rest.chunks(6) {
            let [id, key, token, attempt, payload, waited] = t else {
                return Err(QueueError::Corrupt("take reply".into()));
            };
            tasks.push(Leased {
                id: text(id)?,
                key: text(key)?,
                token: text(token)?,
                attempt: int(attempt)? as u32,
                payload: text(payload)?,
                waited_ms: int(waited)?.max(0) as u64,
            });
        }
        Ok(Taken { tasks, next_due: (next >= 0).then(|| Duration::from_millis(next as u64)) })
    }

    fn waiter_one(&self, q: &QueueSpec) -> Box<dyn Waiter> {
        Box::new(RedisWaiter { link: self.conn.clone(), conn: None, signal: self.key(q, "signal") })
    }

    async fn renew_one(&self, q: &QueueSpec, leases: &[(String, String)]) -> Result<Vec<String>, QueueError> {
        let mut lost = Vec::new();
        for chunk in leases.chunks(PUSH_CHUNK) {
            let part: Vec<String> = self
                .call("renew", q, |inv| {
                    for (id, token) in chunk {
                        inv.arg(id).arg(token);
                    }
                })
                .await?;
            lost.extend(part);
        }
        Ok(lost)
    }

    async fn finish_one(&self, q: &QueueSpec, acks: &[Ack]) -> Result<u64, QueueError> {
        let mut stale = 0;
        for chunk in acks.chunks(PUSH_CHUNK) {
            stale += self
                .call::<u64>("finish", q, |inv| {
                    for ack in chunk {
                        let (kind, delay, error) = match &ack.resolution {
                            Resolution::Done => ("done", 0, ""),
                            Resolution::Retry { after, error } => {
                                ("retry", after.as_millis() as u64, error.as_str())
                            }
                            Resolution::Fail { error } => ("fail", 0, error.as_str()),
                            Resolution::Release => ("release", 0, ""),
                            Resolution::HandBack => ("handback", 0, ""),
                            Resolution::Again { after } => ("again", after.as_millis() as u64, ""),
                        };
                        inv.arg(&ack.id).arg(&ack.token).arg(kind).arg(delay).arg(error).arg(new_task_id());
                    }
                })
                .await?;
        }
        Ok(stale)
    }

    async fn counts_one(&self, q: &QueueSpec) -> Result<Counts, QueueError> {
        let mut conn = self.conn.clone();
        let (pending, delayed, running, dead, stats): (u64, u64, u64, u64, HashMap<String, u64>) =
            redis::pipe()
                .llen(self.key(q, "ready"))
                .zcard(self.key(q, "delayed"))
                .zcard(self.key(q, "leased"))
                .zcard(self.key(q, "dead"))
                .hgetall(self.key(q, "stats"))
                .query_async(&mut conn)
                .await?;
        let stat = |k: &str| stats.get(k).copied().unwrap_or(0);
        Ok(Counts {
            pending,
            delayed,
            running,
            dead,
            done: stat("done"),
            failed: stat("failed"),
            retried: stat("retried"),
            expired: stat("expired"),
            pushed: stat("pushed"),
        })
    }

    async fn status_one(&self, q: &QueueSpec, id: &str) -> Result<Option<TaskStatus>, QueueError> {
        let mut conn = self.conn.clone();
        let (raw, until): (Option<Vec<u8>>, Option<f64>) = redis::pipe()
            .hget(self.key(q, "rec"), id)
            .zscore(self.key(q, "leased"), id)
            .query_async(&mut conn)
            .await?;
        let Some(raw) = raw else { return Ok(None) };
        let raw = String::from_utf8_lossy(&raw);
        match decode(&raw) {
            Some(rec) => Ok(Some(rec.status(id, &q.name, until.map(|u| u as u64)))),
            None => Err(unreadable(id, &raw)),
        }
    }

    async fn live_id_one(&self, q: &QueueSpec, key: &str) -> Result<Option<String>, QueueError> {
        let mut conn = self.conn.clone();
        Ok(redis::cmd("HGET").arg(self.key(q, "keys")).arg(key).query_async(&mut conn).await?)
    }

    async fn dead_one(&self, q: &QueueSpec, limit: usize) -> Result<Vec<TaskStatus>, QueueError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut conn = self.conn.clone();
        let ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(self.key(q, "dead"))
            .arg(0)
            .arg(limit - 1)
            .arg("REV")
            .query_async(&mut conn)
            .await?;
        self.records(q, &ids).await
    }

    async fn purge_pending_one(&self, q: &QueueSpec) -> Result<u64, QueueError> {
        let mut conn = self.conn.clone();
        let (ready, delayed): (u64, u64) = redis::pipe()
            .llen(self.key(q, "ready"))
            .zcard(self.key(q, "delayed"))
            .query_async(&mut conn)
            .await?;
        // Bounded by what was pending when the call started, so pushes made meanwhile cannot keep
        // it going forever.
        let mut left = ready + delayed;
        let mut dropped = 0;
        while left > 0 {
            let (n, touched): (u64, u64) = self
                .call("purge", q, |inv| {
                    inv.arg(CHUNK);
                })
                .await?;
            dropped += n;
            if touched == 0 {
                break;
            }
            left = left.saturating_sub(touched);
        }
        Ok(dropped)
    }
}

impl RedisEngine {
    /// Retries or purges dead tasks: one by id, or all of those dead when the call started, in
    /// chunks of 500 per script call. Corrupt records a retry leaves dead keep their place at
    /// the front of the set, so each further chunk starts past them.
    async fn dead_op(&self, q: &QueueSpec, op: &str, which: DeadSelection) -> Result<u64, QueueError> {
        let id = match &which {
            DeadSelection::One(id) => id.as_str(),
            DeadSelection::All => "",
        };
        let mut conn = self.conn.clone();
        let mut left: u64 = redis::cmd("ZCARD").arg(self.key(q, "dead")).query_async(&mut conn).await?;
        let (mut total, mut kept) = (0, 0u64);
        loop {
            let (n, k): (u64, u64) = self
                .call("dead", q, |inv| {
                    inv.arg(op).arg(id).arg(kept);
                })
                .await?;
            total += n;
            kept += k;
            left = left.saturating_sub(n + k);
            if n + k == 0 || !id.is_empty() || left == 0 {
                return Ok(total);
            }
        }
    }
}

/// A namespace is part of every key's hash tag: it must not open or close one.
fn check_namespace(namespace: &str) -> Result<(), QueueError> {
    if namespace.is_empty() || namespace.contains(['{', '}', ':']) {
        return Err(QueueError::Invalid(format!(
            "namespace {namespace:?}: must be non-empty without '{{', '}}' or ':'"
        )));
    }
    Ok(())
}

impl From<LinkError> for QueueError {
    fn from(e: LinkError) -> Self {
        match e {
            LinkError::Unreachable { source, .. } => Self::Redis(source),
            LinkError::Credentials { reason, .. } => Self::Redis(::redis::RedisError::from((
                ::redis::ErrorKind::AuthenticationFailed,
                "credentials",
                reason,
            ))),
            config => Self::Invalid(config.to_string()),
        }
    }
}
