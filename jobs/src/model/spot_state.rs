//! A Spot pool's failover state on its Config record: the preemptions and refused Spot inserts
//! of the last window, the failover in force, and totals; and the pure rules on it (when an
//! event fails the pool over, when a failover ends). The steps that record events are
//! `crate::placement::spot`; what a failed-over pool makes is `ConfigRecord::new_vm_attributes`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::{Secs, SpotFailover};

/// Events kept at most (the newest), whatever the window: a record read by every handler stays
/// small.
pub const MAX_EVENTS: usize = 256;

/// How long an event's key is kept at least, so a task run again later still finds it (and
/// does not count it twice), even with a short window.
pub const KEEP_KEYS: Secs = Secs(3600);

/// What happened to a Spot VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SpotEventKind {
    /// Compute stopped or deleted its instance (found down or gone).
    Preempted,
    /// Compute refused its insert for want of capacity (stockout) or quota.
    Refused,
}

impl SpotEventKind {
    /// Its label value and word: `preempted`, `refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            SpotEventKind::Preempted => "preempted",
            SpotEventKind::Refused => "refused",
        }
    }
}

/// One preemption or refusal, counted once per key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpotEvent {
    /// What names it once: the hostname for a preemption (one per incarnation), the hostname
    /// and the insert (its operation, or its attempt and send time) for a refusal.
    pub key: String,
    /// Which.
    pub kind: SpotEventKind,
    /// When it was recorded.
    pub at: DateTime<Utc>,
    /// True once a failover counted it: the next failover (or a longer one) needs new events.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spent: bool,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// A failover: the pool makes standard VMs from `since` until `until`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Failover {
    /// When it started.
    pub since: DateTime<Utc>,
    /// When new VMs are Spot again.
    pub until: DateTime<Utc>,
    /// Preemptions among the events that started it (or last lengthened it).
    pub preempted: u32,
    /// Refused Spot inserts among them.
    pub refused: u32,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// A Spot pool's failover state, kept on its Config record (written with a compare-and-set, so
/// every process shares it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpotState {
    /// Recent events, oldest first (those of the window, and keys kept [`KEEP_KEYS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<SpotEvent>,
    /// The last failover, until it is over and said so (see [`SpotState::ended`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<Failover>,
    /// Preemptions counted, ever.
    #[serde(default)]
    pub preempted: u64,
    /// Refused Spot inserts counted, ever.
    #[serde(default)]
    pub refused: u64,
    /// Failovers started, ever.
    #[serde(default)]
    pub failovers: u64,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// What [`SpotState::add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// The key was counted already: nothing changed.
    Seen,
    /// Counted; not (or not yet) too many.
    Counted,
    /// Counted, and a failover started.
    Started,
    /// Counted while failed over, and too many again: the failover lasts longer.
    Lengthened,
}

impl SpotState {
    /// Nothing to store.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The failover in force at `now`, if any.
    pub fn active(&self, now: DateTime<Utc>) -> Option<&Failover> {
        self.failover.as_ref().filter(|f| now < f.until)
    }

    /// The events counted toward a failover at `now` under `rule`: within its window and not
    /// spent; (preemptions, refusals).
    pub fn counted(&self, rule: &SpotFailover, now: DateTime<Utc>) -> (u32, u32) {
        let from = now - rule.within.chrono();
        self.events.iter().filter(|e| !e.spent && e.at > from).fold((0, 0), |(p, r), e| match e.kind {
            SpotEventKind::Preempted => (p + 1, r),
            SpotEventKind::Refused => (p, r + 1),
        })
    }

    /// The one rule of counting: event `key` of `kind` at `now` is counted once; more than
    /// `rule.more_than` unspent events within `rule.within` start a failover until `cooldown`
    /// from now (or, while one is in force, make it last until then) and are spent by it.
    pub fn add(&mut self, rule: &SpotFailover, key: &str, kind: SpotEventKind, now: DateTime<Utc>) -> Added {
        if self.events.iter().any(|e| e.key == key) {
            return Added::Seen;
        }
        match kind {
            SpotEventKind::Preempted => self.preempted = self.preempted.saturating_add(1),
            SpotEventKind::Refused => self.refused = self.refused.saturating_add(1),
        }
        self.events.push(SpotEvent {
            unknown: Default::default(),
            key: key.to_owned(),
            kind,
            at: now,
            spent: false,
        });
        let keep_from = now - rule.within.max(KEEP_KEYS).chrono();
        self.events.retain(|e| e.at > keep_from);
        let over = self.events.len().saturating_sub(MAX_EVENTS);
        self.events.drain(..over);
        let (preempted, refused) = self.counted(rule, now);
        if preempted + refused <= rule.more_than {
            return Added::Counted;
        }
        let from = now - rule.within.chrono();
        for e in self.events.iter_mut().filter(|e| e.at > from) {
            e.spent = true;
        }
        let until = now + rule.cooldown.chrono();
        match self.failover.as_mut().filter(|f| now < f.until) {
            Some(f) => {
                *f = Failover { until: until.max(f.until), preempted, refused, ..f.clone() };
                Added::Lengthened
            }
            None => {
                self.failover =
                    Some(Failover { unknown: Default::default(), since: now, until, preempted, refused });
                self.failovers = self.failovers.saturating_add(1);
                Added::Started
            }
        }
    }

    /// Takes the failover once it is over at `now` (the caller says so once): `None` while one
    /// is in force, or none was.
    pub fn ended(&mut self, now: DateTime<Utc>) -> Option<Failover> {
        self.failover.take_if(|f| now >= f.until)
    }
}

/// A Spot pool's failover as status shows it (present for a Config with `spot_failover`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpotStatus {
    /// The failover in force: new VMs are standard until its `until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<Failover>,
    /// Preemptions counted now toward a failover (within the window, not spent by one).
    pub preempted: u32,
    /// Refused Spot inserts counted now toward a failover.
    pub refused: u32,
    /// The rule: more than this many within `within` fail over...
    pub more_than: u32,
    /// ... within this many seconds...
    pub within: u64,
    /// ... for this many seconds.
    pub cooldown: u64,
    /// Preemptions counted, ever.
    pub preempted_total: u64,
    /// Refused Spot inserts counted, ever.
    pub refused_total: u64,
    /// Failovers started, ever.
    pub failovers_total: u64,
}

impl SpotStatus {
    /// The status of `state` under `rule` at `now`.
    pub fn of(state: &SpotState, rule: &SpotFailover, now: DateTime<Utc>) -> Self {
        let (preempted, refused) = state.counted(rule, now);
        Self {
            failover: state.active(now).cloned(),
            preempted,
            refused,
            more_than: rule.more_than,
            within: rule.within.0,
            cooldown: rule.cooldown.0,
            preempted_total: state.preempted,
            refused_total: state.refused,
            failovers_total: state.failovers,
        }
    }
}

#[cfg(test)]
mod tests;
