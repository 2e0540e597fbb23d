//! The stored task record both engines share (JSON written by Lua on Redis), its public view, and
//! the view of a record no one can read (a corrupt record).

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Deserializer, Serialize};

use super::model::{QueueError, RunStatus, TaskStatus};

/// Stored record of one task; the Redis engine keeps it as JSON (written by Lua, hence the short
/// names), the memory engine as is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Rec {
    /// Key.
    pub(crate) k: String,
    /// State: pending, running, completed, failed.
    pub(crate) s: String,
    /// Reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) r: Option<String>,
    /// Attempts.
    pub(crate) a: u32,
    /// Max attempts.
    pub(crate) m: u32,
    /// Created, ms.
    pub(crate) c: u64,
    /// Deadline, ms (0: none).
    pub(crate) d: u64,
    /// Due, ms (while pending).
    pub(crate) due: u64,
    /// Lease token (while running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tok: Option<String>,
    /// Last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) e: Option<String>,
    /// Runs.
    #[serde(default, deserialize_with = "seq_or_empty_map")]
    pub(crate) runs: Vec<RunRec>,
    /// Follow-up due time, ms (a push arrived while running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fu: Option<u64>,
    /// Resolved, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) done: Option<u64>,
}

/// Stored run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RunRec {
    pub(crate) n: u32,
    pub(crate) w: String,
    pub(crate) g: String,
    pub(crate) s: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) e: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) o: Option<String>,
}

/// Runs kept per task record.
pub(crate) const KEEP_RUNS: usize = 10;

/// Lua's cjson writes an empty table as `{}`; accept it (and null) as an empty list.
fn seq_or_empty_map<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<RunRec>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum SeqOrMap {
        Null(()),
        Seq(Vec<RunRec>),
        Map(serde_json::Map<String, serde_json::Value>),
    }
    match SeqOrMap::deserialize(d)? {
        SeqOrMap::Null(()) => Ok(Vec::new()),
        SeqOrMap::Seq(v) => Ok(v),
        SeqOrMap::Map(m) if m.is_empty() => Ok(Vec::new()),
        SeqOrMap::Map(_) => Err(serde::de::Error::custom("runs: expected a list")),
    }
}

fn ms(t: u64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(t as i64).single().unwrap_or_default()
}

impl Rec {
    /// The public view of this record.
    pub(crate) fn status(&self, id: &str, queue: &str, taken_until: Option<u64>) -> TaskStatus {
        TaskStatus {
            task_id: id.to_owned(),
            queue: queue.to_owned(),
            key: self.k.clone(),
            state: self.s.clone(),
            reason: self.r.clone().unwrap_or_else(|| "none".into()),
            attempts: self.a,
            retries: self.m.saturating_sub(self.a),
            runs: self
                .runs
                .iter()
                .map(|r| RunStatus {
                    run_id: r.n,
                    worker_group: r.g.clone(),
                    worker_id: r.w.clone(),
                    started: ms(r.s),
                    resolved: r.e.map(ms),
                    outcome: r.o.clone(),
                })
                .collect(),
            created: ms(self.c),
            deadline: (self.d > 0).then(|| ms(self.d)),
            taken_until: if self.s == "running" { taken_until.map(ms) } else { None },
            run_at: (self.s == "pending").then(|| ms(self.due)),
            resolved: self.done.map(ms),
            last_error: self.e.clone(),
            follow_up: self.fu.is_some(),
        }
    }
}

/// Most bytes of a corrupt record's text kept in the error of the record that replaces it.
pub(crate) const RAW_KEEP: usize = 1000;

/// `s` cut to at most `n` bytes without splitting a character, with `...` when cut (as `clip`
/// in `lua/prelude.lua`).
pub(crate) fn clip(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_owned();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// The error kept on the record that replaces a corrupt one: its raw text, clipped.
pub(crate) fn corrupt_error(raw: &str) -> String {
    format!("corrupt record: {}", clip(raw, RAW_KEEP))
}

/// The key a corrupt record still names, if its text is a JSON object with a string `k`.
pub(crate) fn raw_key(raw: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(raw).ok()?;
    value.get("k")?.as_str().map(str::to_owned)
}

/// Decodes a stored record; `None` when it is corrupt.
pub(crate) fn decode(raw: &str) -> Option<Rec> {
    serde_json::from_str(raw).ok()
}

/// The view of a record that no queue call has met (and buried) yet, listed under `state`: reason
/// `corrupt` and its raw text in `last_error`.
pub(crate) fn corrupt_status(id: &str, queue: &str, state: &str, raw: &str) -> TaskStatus {
    TaskStatus {
        task_id: id.to_owned(),
        queue: queue.to_owned(),
        key: raw_key(raw).unwrap_or_default(),
        state: state.to_owned(),
        reason: "corrupt".into(),
        attempts: 0,
        retries: 0,
        runs: Vec::new(),
        created: DateTime::<Utc>::default(),
        deadline: None,
        taken_until: None,
        run_at: None,
        resolved: None,
        last_error: Some(corrupt_error(raw)),
        follow_up: false,
    }
}

/// The error `status` answers for a record no queue call has met (and buried) yet.
pub(crate) fn unreadable(id: &str, raw: &str) -> QueueError {
    QueueError::Corrupt(format!("task {id}: {}", corrupt_error(raw)))
}

#[cfg(test)]
mod tests;
