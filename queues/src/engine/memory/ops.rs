//! The memory engine's mirror of the Lua scripts: one function per script (`push.lua`, `take.lua`,
//! `renew.lua`, `finish.lua`, `dead.lua`, `purge.lua`).

use std::time::Duration;

use super::script::Load;
use super::{CHUNK, Op};
use crate::engine::{
    Ack, DeadSelection, KEEP_RUNS, Leased, PushItem, PushOutcome, Resolution, RunRec, Taken, WorkerId,
};

impl Op<'_> {
    pub(super) fn push(&mut self, items: &[PushItem]) -> Vec<PushOutcome> {
        items
            .iter()
            .map(|it| {
                let key = Some(it.key.as_str());
                let mut id = self.q.keys.get(&it.key).cloned();
                let mut rec = id.clone().and_then(|id| self.load(&id, key).rec());
                if id.is_some() && rec.is_none() {
                    // No readable record: none at all, or a corrupt one just buried (whose
                    // follow-up may now be the key's task). Look again.
                    id = self.q.keys.get(&it.key).cloned();
                    rec = id.clone().and_then(|id| self.load(&id, key).rec());
                }
                match (id, rec) {
                    (Some(id), Some(mut rec)) if rec.s == "running" => {
                        if let Some(fu) = rec.fu {
                            if it.hurry && fu > self.now {
                                rec.fu = Some(self.now);
                                self.save(&id, rec);
                            }
                            PushOutcome::FollowUpAlreadyPending(id)
                        } else {
                            rec.fu = Some(self.now + it.delay_ms);
                            self.q.data.insert(format!("{id}:f"), it.payload.clone());
                            self.save(&id, rec);
                            PushOutcome::FollowUp(id)
                        }
                    }
                    (Some(id), Some(mut rec)) if rec.s == "pending" => {
                        if it.hurry && rec.a == 0 && rec.due > self.now && self.q.delayed.remove(&id) {
                            rec.due = self.now;
                            self.save(&id, rec);
                            self.enqueue(&id, self.now);
                        }
                        PushOutcome::AlreadyPending(id)
                    }
                    _ => {
                        let due = self.now + it.delay_ms;
                        PushOutcome::Enqueued(self.new_task(&it.key, it.payload.clone(), due))
                    }
                }
            })
            .collect()
    }

    pub(super) fn take(&mut self, worker: &WorkerId, max: usize) -> Taken {
        for id in self.q.delayed.up_to(self.now, CHUNK) {
            self.q.delayed.remove(&id);
            self.q.ready.push_back(id);
        }
        for id in self.q.leased.up_to(self.now, CHUNK) {
            self.q.leased.remove(&id);
            let Some(mut rec) = self.load(&id, None).rec().filter(|r| r.s == "running") else { continue };
            self.close_run(&mut rec, "lease-expired");
            rec.tok = None;
            rec.e = Some("lease expired".into());
            self.q.stats.expired += 1;
            if rec.a >= rec.m {
                self.resolve(&id, rec, "failed", Some("lease-expired"));
            } else {
                rec.s = "pending".into();
                rec.due = self.now;
                self.merge_follow_up(&id, &mut rec);
                self.save(&id, rec);
                self.q.ready.push_front(id);
            }
        }
        // One id at a time, each record checked before the next pop (a corrupt one is buried),
        // until `max` tasks are taken or the list is empty; at most `max + CHUNK` pops per call.
        let mut tasks = Vec::new();
        let lease = self.spec.policy.lease.as_millis() as u64;
        let mut popped = 0;
        while tasks.len() < max && popped < max + CHUNK {
            let Some(id) = self.q.ready.pop_front() else { break };
            popped += 1;
            let Some(mut rec) = self.load(&id, None).rec().filter(|r| r.s == "pending") else { continue };
            if rec.d > 0 && rec.d <= self.now {
                rec.e = Some("deadline exceeded".into());
                self.resolve(&id, rec, "failed", Some("deadline-exceeded"));
                continue;
            }
            rec.s = "running".into();
            rec.a += 1;
            let token = format!("{}:{}:{}", worker.id, id, rec.a);
            rec.tok = Some(token.clone());
            // Run numbers go on across looks again (attempts start again there).
            let n = rec.runs.last().map_or(rec.a, |r| rec.a.max(r.n + 1));
            rec.runs.push(RunRec {
                n,
                w: worker.id.clone(),
                g: worker.group.clone(),
                s: self.now,
                e: None,
                o: None,
            });
            if rec.runs.len() > KEEP_RUNS {
                rec.runs.remove(0);
            }
            self.q.leased.add(self.now + lease, &id);
            tasks.push(Leased {
                id: id.clone(),
                key: rec.k.clone(),
                token,
                attempt: rec.a,
                payload: self.q.data.get(&id).cloned().unwrap_or_default(),
                waited_ms: self.now.saturating_sub(rec.due),
            });
            self.save(&id, rec);
        }
        let next = [self.q.delayed.first_score(), self.q.leased.first_score()]
            .into_iter()
            .flatten()
            .min()
            .map(|t| Duration::from_millis(t.saturating_sub(self.now)));
        Taken { tasks, next_due: next }
    }

    /// The record of `id` if it is running under `token`; a corrupt one is buried.
    fn running(&mut self, id: &str, token: &str) -> Option<crate::engine::Rec> {
        self.load(id, None).rec().filter(|r| r.s == "running" && r.tok.as_deref() == Some(token))
    }

    pub(super) fn renew(&mut self, leases: &[(String, String)]) -> Vec<String> {
        let until = self.now + self.spec.policy.lease.as_millis() as u64;
        leases
            .iter()
            .filter_map(|(id, token)| match self.running(id, token) {
                Some(_) => {
                    self.q.leased.add(until, id);
                    None
                }
                None => Some(id.clone()),
            })
            .collect()
    }

    pub(super) fn finish(&mut self, acks: &[Ack]) -> u64 {
        let mut stale = 0;
        for ack in acks {
            let Some(mut rec) = self.running(&ack.id, &ack.token) else {
                stale += 1;
                continue;
            };
            let id = ack.id.as_str();
            self.q.leased.remove(id);
            rec.tok = None;
            match &ack.resolution {
                Resolution::Release | Resolution::HandBack => {
                    // As finish.lua: a task not started drops its run, a cut one keeps it.
                    match ack.resolution {
                        Resolution::Release => drop(rec.runs.pop()),
                        _ => self.close_run(&mut rec, "handed-back"),
                    }
                    rec.a -= 1;
                    rec.s = "pending".into();
                    rec.due = self.now;
                    self.merge_follow_up(id, &mut rec);
                    self.save(id, rec);
                    self.q.ready.push_front(id.to_owned());
                    self.q.notify.notify_one();
                }
                Resolution::Again { after } => {
                    self.close_run(&mut rec, "again");
                    rec.s = "pending".into();
                    rec.a = 0;
                    rec.e = None;
                    rec.due = self.now + after.as_millis() as u64;
                    let deadline = self.spec.policy.deadline.as_millis() as u64;
                    if deadline > 0 {
                        rec.d = self.now + deadline;
                    }
                    self.q.stats.done += 1;
                    self.merge_follow_up(id, &mut rec);
                    let due = rec.due;
                    self.save(id, rec);
                    self.enqueue(id, due);
                }
                Resolution::Done => {
                    self.close_run(&mut rec, "done");
                    self.resolve(id, rec, "completed", None);
                }
                Resolution::Fail { error } => {
                    self.close_run(&mut rec, "fail");
                    rec.e = Some(error.clone());
                    self.resolve(id, rec, "failed", Some("permanent"));
                }
                Resolution::Retry { after, error } => {
                    self.close_run(&mut rec, "retry");
                    rec.e = Some(error.clone());
                    if rec.a >= rec.m {
                        self.resolve(id, rec, "failed", Some("retries-exhausted"));
                    } else {
                        rec.s = "pending".into();
                        rec.due = self.now + after.as_millis() as u64;
                        self.q.stats.retried += 1;
                        self.merge_follow_up(id, &mut rec);
                        let due = rec.due;
                        self.save(id, rec);
                        self.enqueue(id, due);
                    }
                }
            }
        }
        self.trim();
        stale
    }

    /// `dead.lua` with `retry`: puts dead tasks back as pending with fresh attempts (a task whose
    /// key has a live task is superseded instead; a corrupt record stays dead, in its place).
    pub(super) fn retry_dead(&mut self, which: DeadSelection) -> u64 {
        let ids = match which {
            DeadSelection::One(id) => vec![id],
            DeadSelection::All => self.q.dead.oldest(usize::MAX),
        };
        let mut n = 0;
        for id in ids {
            if !self.q.dead.contains(&id) {
                continue;
            }
            let mut rec = match self.load(&id, None) {
                Load::Corrupt => continue,
                Load::Rec(rec) if rec.r.as_deref() == Some("corrupt") => continue,
                Load::Rec(rec) => rec,
                Load::Missing => {
                    n += 1;
                    self.drop_ids(vec![id], true);
                    continue;
                }
            };
            n += 1;
            self.q.dead.remove(&id);
            if self.q.keys.contains_key(&rec.k) {
                rec.r = Some("superseded".into());
                self.q.data.remove(&id);
                self.q.finished.add(self.now, &id);
                self.save(&id, rec);
            } else {
                rec.s = "pending".into();
                rec.r = None;
                rec.a = 0;
                rec.done = None;
                rec.e = None;
                rec.due = self.now;
                let deadline = self.spec.policy.deadline.as_millis() as u64;
                if deadline > 0 {
                    rec.d = self.now + deadline;
                }
                self.q.keys.insert(rec.k.clone(), id.clone());
                self.save(&id, rec);
                self.enqueue(&id, self.now);
            }
        }
        n
    }

    /// `purge.lua`: takes up to `chunk` ids off the pending lists, due first, then delayed, and
    /// drops those that are pending tasks (record, payload, follow-up payload, key entry; a
    /// corrupt record is buried instead). Returns (tasks dropped, ids taken off the lists).
    pub(super) fn purge_chunk(&mut self, chunk: usize) -> (u64, u64) {
        let n = chunk.min(self.q.ready.len());
        let mut ids: Vec<String> = self.q.ready.drain(..n).collect();
        for id in self.q.delayed.oldest(chunk - ids.len()) {
            self.q.delayed.remove(&id);
            ids.push(id);
        }
        let touched = ids.len() as u64;
        let mut dropped = 0;
        for id in ids {
            let Some(rec) = self.load(&id, None).rec().filter(|r| r.s == "pending") else { continue };
            if self.q.keys.get(&rec.k) == Some(&id) {
                self.q.keys.remove(&rec.k);
            }
            self.q.rec.remove(&id);
            self.q.data.remove(&id);
            self.q.data.remove(&format!("{id}:f"));
            dropped += 1;
        }
        (dropped, touched)
    }
}
