//! The memory engine's mirror of `lua/prelude.lua`: the helpers every operation shares.

use super::super::Rec;
use super::super::record::{corrupt_error, corrupt_status, raw_key};
use super::{Op, Stored, TRIM_CHUNK};
use crate::engine::{TaskStatus, new_task_id};

/// What [`Op::load`] found.
#[allow(
    clippy::large_enum_variant,
    reason = "a short-lived return value: boxing would only add an allocation"
)]
pub(super) enum Load {
    /// A readable record.
    Rec(Rec),
    /// No record.
    Missing,
    /// A corrupt record, now buried.
    Corrupt,
}

impl Load {
    /// The record, if readable.
    pub(super) fn rec(self) -> Option<Rec> {
        match self {
            Load::Rec(r) => Some(r),
            Load::Missing | Load::Corrupt => None,
        }
    }
}

impl Op<'_> {
    pub(super) fn save(&mut self, id: &str, rec: Rec) {
        self.q.rec.insert(id.to_owned(), Stored::Rec(rec));
    }

    pub(super) fn enqueue(&mut self, id: &str, due: u64) {
        if due <= self.now {
            self.q.ready.push_back(id.to_owned());
            self.q.notify.notify_one();
        } else {
            // The soonest delayed task: a waiting worker may sleep past it, so wake one to look.
            let soonest = self.q.delayed.first_score().is_none_or(|first| due < first);
            self.q.delayed.add(due, id);
            if soonest {
                self.q.notify.notify_one();
            }
        }
    }

    /// Creates a pending task for `key` under a fresh random id (one no record holds).
    pub(super) fn new_task(&mut self, key: &str, payload: String, due: u64) -> String {
        let mut id = new_task_id();
        while self.q.rec.contains_key(&id) {
            id = new_task_id();
        }
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
        self.save(&id, rec);
        self.enqueue(&id, due);
        self.q.stats.pushed += 1;
        id
    }

    /// A record the engine cannot read goes to the dead set at once (keeping its place if there
    /// already), replaced by a readable one with reason `corrupt` and the raw text in its error,
    /// and is taken off every list. Its key is `key` (the caller's) or the one the raw text still
    /// names, else empty. A follow-up payload waiting on it becomes a new task when the key is
    /// known and has no live task.
    fn bury(&mut self, id: &str, raw: &str, key: Option<&str>) {
        let key = key.map(str::to_owned).or_else(|| raw_key(raw)).unwrap_or_default();
        self.q.ready.retain(|x| x != id);
        self.q.delayed.remove(id);
        self.q.leased.remove(id);
        if !key.is_empty() && self.q.keys.get(&key).map(String::as_str) == Some(id) {
            self.q.keys.remove(&key);
        }
        let rec = Rec {
            k: key.clone(),
            s: "failed".into(),
            r: Some("corrupt".into()),
            a: 0,
            m: self.spec.policy.max_attempts,
            c: self.now,
            d: 0,
            due: self.now,
            tok: None,
            e: Some(corrupt_error(raw)),
            runs: Vec::new(),
            fu: None,
            done: Some(self.now),
        };
        self.save(id, rec);
        if self.q.dead.add_new(self.now, id) {
            self.q.stats.failed += 1;
        }
        if let Some(fu) = self.q.data.remove(&format!("{id}:f"))
            && !key.is_empty()
            && !self.q.keys.contains_key(&key)
        {
            self.new_task(&key, fu, self.now);
        }
    }

    /// A task's record (a copy to change and [`Op::save`]); a corrupt one is buried.
    pub(super) fn load(&mut self, id: &str, key: Option<&str>) -> Load {
        match self.q.rec.get(id) {
            None => Load::Missing,
            Some(Stored::Rec(r)) => Load::Rec(r.clone()),
            Some(Stored::Raw(raw)) => {
                let raw = raw.clone();
                self.bury(id, &raw, key);
                Load::Corrupt
            }
        }
    }

    /// The statuses of `ids` for a listing (read only: a record no call has read yet shows as
    /// corrupt, under `state`; ids without a record are left out).
    pub(super) fn views(&self, ids: Vec<String>, state: &str) -> Vec<TaskStatus> {
        ids.into_iter()
            .filter_map(|id| match self.q.rec.get(&id)? {
                Stored::Rec(r) => Some(r.status(&id, &self.spec.name, None)),
                Stored::Raw(raw) => Some(corrupt_status(&id, &self.spec.name, state, raw)),
            })
            .collect()
    }

    /// A pending task absorbs its follow-up: the newer payload, and the earlier due time.
    pub(super) fn merge_follow_up(&mut self, id: &str, rec: &mut Rec) {
        if let Some(fu) = rec.fu.take() {
            if let Some(payload) = self.q.data.remove(&format!("{id}:f")) {
                self.q.data.insert(id.to_owned(), payload);
            }
            rec.due = rec.due.min(fu);
        }
    }

    pub(super) fn close_run(&self, rec: &mut Rec, outcome: &str) {
        if let Some(run) = rec.runs.last_mut() {
            run.e = Some(self.now);
            run.o = Some(outcome.to_owned());
        }
    }

    /// Ends a task as completed or failed; a follow-up that arrived during the run becomes a new
    /// task.
    pub(super) fn resolve(&mut self, id: &str, mut rec: Rec, state: &str, reason: Option<&str>) {
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
        self.save(id, rec);
        if let Some(fu) = fu
            && let Some(payload) = self.q.data.remove(&format!("{id}:f"))
        {
            self.new_task(&key, payload, fu);
        }
    }

    pub(super) fn drop_ids(&mut self, ids: Vec<String>, dead: bool) {
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

    /// Bounded trimming of finished and dead records, a chunk per call.
    pub(super) fn trim(&mut self) {
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
}
