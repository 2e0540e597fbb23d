//! A queue spread over partitions ([`QueueSpec::partitions`]): partition 0 keeps the queue's
//! own keys (`{ns:q}:…`, as an unpartitioned queue and every build before partitions), partition
//! `p` has keys of its own hash tag (`{ns:q:p}:…`), so a busy queue's work spreads over a Redis
//! Cluster's primaries instead of loading the one that holds its slot.
//!
//! A task goes to the partition of its key (FNV-1a of the key, so every process and build
//! agrees), where the one-pending-task-per-key rule holds as before; order is kept within a
//! partition, not across them. A take tries the partitions in turn from a rotating start until it
//! has as many tasks as asked for; a lease token says which
//! partition it came from (`~<p>~<token>`), so renewals and acks go back to it. Workers wait on
//! partition 0's signal list; a push that enqueues a task elsewhere (due or delayed: it may be
//! the soonest) wakes them there as well.
//! Counts add up, listings merge, a task looked up by id is looked for in every partition.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use super::RedisEngine;
use crate::engine::{
    Ack, Counts, DeadSelection, Engine, PushItem, PushOutcome, QueueError, QueueSpec, Taken, TaskStatus,
    Waiter, WorkerId,
};

/// Where takes start, turned by each (shared by the engine's clones; fairness only).
static START: AtomicUsize = AtomicUsize::new(0);

/// Wake-ups pushed to partition 0's signal list at most per push (the list's own cap).
const MAX_WAKES: usize = 64;

/// The partition of task key `key` in a queue of `n` partitions.
pub(super) fn partition_of(key: &str, n: u16) -> u16 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(n.max(1))) as u16
}

/// A lease token as handed out: partition 0's as the script made it.
fn wrap(p: u16, token: String) -> String {
    if p == 0 { token } else { format!("~{p}~{token}") }
}

/// The partition of a token handed out, and the script's token.
fn unwrap(token: &str) -> (u16, &str) {
    token
        .strip_prefix('~')
        .and_then(|t| t.split_once('~'))
        .and_then(|(p, rest)| Some((p.parse().ok()?, rest)))
        .unwrap_or((0, token))
}

impl RedisEngine {
    /// The spec of partition `p` of `q`: its own name in its keys' hash tag.
    fn part(q: &QueueSpec, p: u16) -> QueueSpec {
        if p == 0 {
            return q.clone();
        }
        QueueSpec { name: format!("{}:{p}", q.name), policy: q.policy.clone(), partitions: 1 }
    }

    /// Each partition's spec.
    fn parts(q: &QueueSpec) -> impl Iterator<Item = (u16, QueueSpec)> + '_ {
        (0..q.partitions.max(1)).map(move |p| (p, Self::part(q, p)))
    }

    /// A status read in a partition, named after the queue.
    fn named(q: &QueueSpec, mut s: TaskStatus) -> TaskStatus {
        s.queue.clone_from(&q.name);
        s
    }

    /// Merged listings of every partition, sorted by `by`, `limit` from `offset`.
    fn page(
        q: &QueueSpec,
        all: Vec<TaskStatus>,
        by: impl Fn(&TaskStatus) -> i64,
        limit: usize,
        offset: usize,
    ) -> Vec<TaskStatus> {
        let mut all = all;
        all.sort_by_key(|s| by(s));
        all.into_iter().skip(offset).take(limit).map(|s| Self::named(q, s)).collect()
    }
}

#[async_trait]
impl Engine for RedisEngine {
    async fn push(&self, q: &QueueSpec, items: &[PushItem]) -> Result<Vec<PushOutcome>, QueueError> {
        if q.partitions <= 1 {
            return self.push_one(q, items).await;
        }
        let mut by: Vec<Vec<usize>> = vec![Vec::new(); q.partitions as usize];
        for (i, it) in items.iter().enumerate() {
            by[partition_of(&it.key, q.partitions) as usize].push(i);
        }
        let mut out: Vec<Option<PushOutcome>> = vec![None; items.len()];
        let mut wakes = 0;
        for (p, at) in by.iter().enumerate().filter(|(_, at)| !at.is_empty()) {
            let mine: Vec<PushItem> = at.iter().map(|&i| items[i].clone()).collect();
            let done = self.push_one(&Self::part(q, p as u16), &mine).await?;
            for (&i, o) in at.iter().zip(done) {
                // A task made due, or delayed (it may be the soonest), outside partition 0: the
                // workers waiting there look again (in partition 0 the script wakes them).
                if p > 0 && (matches!(o, PushOutcome::Enqueued(_)) || items[i].hurry) {
                    wakes += 1;
                }
                out[i] = Some(o);
            }
        }
        if wakes > 0 {
            self.wake(q, wakes.min(MAX_WAKES)).await?;
        }
        Ok(out.into_iter().map(|o| o.expect("every item pushed")).collect())
    }

    async fn take(&self, q: &QueueSpec, worker: &WorkerId, max: usize) -> Result<Taken, QueueError> {
        if q.partitions <= 1 {
            return self.take_one(q, worker, max).await;
        }
        let n = q.partitions as usize;
        let start = START.fetch_add(1, Ordering::Relaxed);
        let mut out = Taken::default();
        for i in 0..n {
            let p = ((start + i) % n) as u16;
            let t = self.take_one(&Self::part(q, p), worker, max - out.tasks.len()).await?;
            out.tasks.extend(t.tasks.into_iter().map(|mut task| {
                task.token = wrap(p, std::mem::take(&mut task.token));
                task
            }));
            out.next_due = match (out.next_due, t.next_due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if out.tasks.len() >= max {
                break;
            }
        }
        Ok(out)
    }

    fn waiter(&self, q: &QueueSpec) -> Box<dyn Waiter> {
        self.waiter_one(q)
    }

    async fn renew(&self, q: &QueueSpec, leases: &[(String, String)]) -> Result<Vec<String>, QueueError> {
        let mut by: std::collections::BTreeMap<u16, Vec<(String, String)>> = Default::default();
        for (id, token) in leases {
            let (p, t) = unwrap(token);
            by.entry(p).or_default().push((id.clone(), t.to_owned()));
        }
        let mut lost = Vec::new();
        for (p, mine) in by {
            if p >= q.partitions.max(1) {
                lost.extend(mine.into_iter().map(|(id, _)| id)); // (no such partition: not ours)
                continue;
            }
            lost.extend(self.renew_one(&Self::part(q, p), &mine).await?);
        }
        Ok(lost)
    }

    async fn finish(&self, q: &QueueSpec, acks: &[Ack]) -> Result<u64, QueueError> {
        let mut by: std::collections::BTreeMap<u16, Vec<Ack>> = Default::default();
        for a in acks {
            let (p, t) = unwrap(&a.token);
            by.entry(p).or_default().push(Ack { token: t.to_owned(), ..a.clone() });
        }
        let mut stale = 0;
        for (p, mine) in by {
            if p >= q.partitions.max(1) {
                stale += mine.len() as u64;
                continue;
            }
            stale += self.finish_one(&Self::part(q, p), &mine).await?;
        }
        Ok(stale)
    }

    async fn counts(&self, q: &QueueSpec) -> Result<Counts, QueueError> {
        let mut total = Counts::default();
        for (_, part) in Self::parts(q) {
            let c = self.counts_one(&part).await?;
            total.pending += c.pending;
            total.delayed += c.delayed;
            total.running += c.running;
            total.dead += c.dead;
            total.done += c.done;
            total.failed += c.failed;
            total.retried += c.retried;
            total.expired += c.expired;
            total.pushed += c.pushed;
        }
        Ok(total)
    }

    async fn status(&self, q: &QueueSpec, id: &str) -> Result<Option<TaskStatus>, QueueError> {
        for (_, part) in Self::parts(q) {
            if let Some(s) = self.status_one(&part, id).await? {
                return Ok(Some(Self::named(q, s)));
            }
        }
        Ok(None)
    }

    async fn live_id(&self, q: &QueueSpec, key: &str) -> Result<Option<String>, QueueError> {
        let p = partition_of(key, q.partitions);
        if let Some(id) = self.live_id_one(&Self::part(q, p), key).await? {
            return Ok(Some(id));
        }
        // (a task pushed before the queue had partitions)
        if p != 0 { self.live_id_one(q, key).await } else { Ok(None) }
    }

    async fn dead(&self, q: &QueueSpec, limit: usize) -> Result<Vec<TaskStatus>, QueueError> {
        let mut all = Vec::new();
        for (_, part) in Self::parts(q) {
            all.extend(self.dead_one(&part, limit).await?);
        }
        let when = |s: &TaskStatus| -s.resolved.map_or(0, |t| t.timestamp_millis());
        Ok(Self::page(q, all, when, limit, 0))
    }

    async fn retry_dead(&self, q: &QueueSpec, which: DeadSelection) -> Result<u64, QueueError> {
        let mut n = 0;
        for (_, part) in Self::parts(q) {
            n += self.dead_op(&part, "retry", which.clone()).await?;
            if n > 0 && matches!(which, DeadSelection::One(_)) {
                break;
            }
        }
        Ok(n)
    }

    async fn purge_dead(&self, q: &QueueSpec) -> Result<u64, QueueError> {
        let mut n = 0;
        for (_, part) in Self::parts(q) {
            n += self.dead_op(&part, "purge", DeadSelection::All).await?;
        }
        Ok(n)
    }

    async fn pending(
        &self,
        q: &QueueSpec,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<TaskStatus>, QueueError> {
        self.listed(q, "ready", limit, offset).await
    }

    async fn delayed(
        &self,
        q: &QueueSpec,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<TaskStatus>, QueueError> {
        self.listed(q, "delayed", limit, offset).await
    }

    async fn purge_pending(&self, q: &QueueSpec) -> Result<u64, QueueError> {
        let mut n = 0;
        for (_, part) in Self::parts(q) {
            n += self.purge_pending_one(&part).await?;
        }
        Ok(n)
    }
}

impl RedisEngine {
    /// A page of the ready lists or delayed sets of every partition, by when each is due.
    async fn listed(
        &self,
        q: &QueueSpec,
        which: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<TaskStatus>, QueueError> {
        if q.partitions <= 1 {
            return self.list(q, which, limit, offset).await;
        }
        let mut all = Vec::new();
        for (_, part) in Self::parts(q) {
            all.extend(self.list(&part, which, limit + offset, 0).await?);
        }
        let due = |s: &TaskStatus| s.run_at.unwrap_or(s.created).timestamp_millis();
        Ok(Self::page(q, all, due, limit, offset))
    }

    /// Wakes `n` workers waiting on `q` (its partition 0's signal list, capped as the scripts cap it).
    async fn wake(&self, q: &QueueSpec, n: usize) -> Result<(), QueueError> {
        let key = self.key(q, "signal");
        let mut conn = self.conn.clone();
        let len: usize = redis::cmd("RPUSH").arg(&key).arg(vec!["1"; n]).query_async(&mut conn).await?;
        if len > MAX_WAKES {
            let () = redis::cmd("LTRIM").arg(&key).arg(0).arg(MAX_WAKES - 1).query_async(&mut conn).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{partition_of, unwrap, wrap};

    #[test]
    fn tokens_say_their_partition_and_keys_spread() {
        assert_eq!(unwrap(&wrap(0, "w:id:1".into())), (0, "w:id:1"));
        assert_eq!(unwrap(&wrap(7, "w:id:1".into())), (7, "w:id:1"));
        assert_eq!(unwrap("~x~w"), (0, "~x~w"), "not a partition: the token as it is");
        let mut seen = [0; 8];
        for i in 0..8000 {
            seen[partition_of(&format!("linux-{i}"), 8) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
        // Fixed by the layout: the same in every process and build.
        assert_eq!((partition_of("linux-1", 16), partition_of("mac-12", 16)), (3, 8));
        assert_eq!(partition_of("anything", 1), 0);
    }
}
