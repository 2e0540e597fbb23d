//! A demand-driven Config's last reading of its work (kept on its record) and the rule that turns
//! it into the amount the Config targets.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::Demand;

/// What a demand-driven Config last read of its work, and the amount that follows from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DemandState {
    /// When read.
    pub at: DateTime<Utc>,
    /// Pending tasks counted for this Config (its share: see `demand::shares`).
    pub pending: u32,
    /// Its bots running a task (VMs neither drained nor kept warm).
    pub busy: u32,
    /// Its bots idle (VMs neither drained nor kept warm).
    pub idle: u32,
    /// Of those, idle longer than `idle_timeout`: the most it may shrink by now.
    pub idle_long: u32,
    /// Its VMs neither drained nor kept warm (booting, resuming, connected): the capacity it has.
    pub live: u32,
    /// The amount it targets (before the `amount` bounds).
    pub target: u32,
    /// Why, in words (`busy 3 + pending 12 + min_idle 2`, `held: …`).
    pub why: String,
    /// Set while Swarming cannot be read: since when. The target is held meanwhile (never shrunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<DateTime<Utc>>,
    /// Since when pending tasks and bots idle past `idle_timeout` have been found together: tasks
    /// these bots do not take (they ask for what the Config's bots lack). Past `idle_timeout` more,
    /// they are no longer counted, so such tasks do not hold the pool at its maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unserved_since: Option<DateTime<Utc>>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// What one reading found for a Config: its share of pending tasks and its bots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// Pending tasks counted for it.
    pub pending: u32,
    /// Bots running a task.
    pub busy: u32,
    /// Idle bots.
    pub idle: u32,
    /// Idle bots idle longer than `idle_timeout`.
    pub idle_long: u32,
    /// VMs neither drained nor kept warm.
    pub live: u32,
}

impl DemandState {
    /// The state after reading `r` for a Config with demand `d` at `now` (`last`: the state it
    /// had): the target is `busy + ⌈pending / per_bot⌉ + min_idle`; below the live VMs it goes
    /// down only by the bots idle longer than `idle_timeout` (VMs booting count as capacity,
    /// drained ones do not). Pending tasks found beside bots idle past `idle_timeout` for another
    /// `idle_timeout` are tasks these bots do not take: not counted.
    pub fn read(d: &Demand, r: Reading, last: Option<&DemandState>, now: DateTime<Utc>) -> Self {
        let per_bot = d.per_bot.max(1);
        let unserved_since = match r.pending > 0 && r.idle_long > 0 {
            true => Some(last.and_then(|l| l.unserved_since).unwrap_or(now)),
            false => None,
        };
        let unserved = unserved_since.is_some_and(|t| t + d.idle_timeout.chrono() <= now);
        let pending = if unserved { 0 } else { r.pending };
        let work = r.busy.saturating_add(pending.div_ceil(per_bot));
        let wanted = work.saturating_add(d.min_idle);
        let floor = r.live.saturating_sub(r.idle_long);
        let (target, mut why) = match wanted >= floor {
            true => (wanted, format!("busy {} + pending {} + min_idle {}", r.busy, pending, d.min_idle)),
            false => (
                floor,
                format!(
                    "busy {} + pending {} + min_idle {} = {wanted}; {} idle ≤ {}: kept until idle longer",
                    r.busy,
                    pending,
                    d.min_idle,
                    r.idle - r.idle_long.min(r.idle),
                    d.idle_timeout
                ),
            ),
        };
        if unserved {
            why.push_str(&format!(
                "; {} pending not counted: {} bots idle past {} do not take them",
                r.pending, r.idle_long, d.idle_timeout
            ));
        }
        Self {
            unknown: Default::default(),
            at: now,
            pending: r.pending,
            busy: r.busy,
            idle: r.idle,
            idle_long: r.idle_long,
            live: r.live,
            target,
            why,
            held: None,
            unserved_since,
        }
    }

    /// The state when Swarming cannot be read at `now` (`what` says why): the last target is held,
    /// never shrunk (none yet: `hold`, the amount it has now).
    pub fn held(last: Option<&DemandState>, hold: u32, what: &str, now: DateTime<Utc>) -> Self {
        let mut s = last.cloned().unwrap_or(Self { target: hold, live: hold, ..Self::default() });
        let since = s.held.unwrap_or(now);
        s.held = Some(since);
        s.why = format!("held at {} since {}: {what}", s.target, since.to_rfc3339());
        s
    }

    /// Whether `other` differs in anything but the time it was read.
    pub fn differs(&self, other: &DemandState) -> bool {
        Self { at: other.at, ..self.clone() } != *other
    }
}

#[cfg(test)]
mod tests;
