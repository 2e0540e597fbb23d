//! A demand-driven Config's last reading of its work (kept on its record) and the rule that turns
//! it into the amount the Config targets.
//!
//! **Idle to spare.** A pool shrinks by its bots idle longer than `idle_timeout`; one with a warm
//! pool also by as many bots as were idle together at every reading of the last `idle_timeout`
//! (its *spare*): Swarming hands a task to whichever idle bot asks first, so tasks hop between
//! idle bots and may keep each one's idle time short while the pool has bots it has not needed
//! all along. A VM such a pool lets go is parked and comes back in a resume, so letting go what
//! it did not need costs little; without a warm pool it would come back as a boot, and the pool
//! keeps to each bot's idle time.

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
    /// How many of its bots a walk saw idle at every reading since when, as steps `(since, n)`,
    /// both rising: `n` bots at least since `since` (the levels above the step before it). Those
    /// idle at every reading of the last `idle_timeout` are bots to spare (see [`spare_after`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spare: Vec<(DateTime<Utc>, u32)>,
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
    /// Idle bots as a fresh walk saw them (of `idle`; not those not seen yet, nor those whose
    /// last observation is too old to say).
    pub seen_idle: u32,
    /// VMs neither drained nor kept warm.
    pub live: u32,
    /// It has a warm pool: the VMs it lets go are parked, and it sheds its bots to spare.
    pub parks: bool,
}

/// Most steps [`DemandState::spare`] keeps (readings every 10 s and an idle timeout of 10
/// minutes rise at most 60 times within it).
pub const SPARE_STEPS: usize = 64;

/// The steps of [`DemandState::spare`] after a reading at `now` that saw `seen` bots idle, from
/// the steps `last`: levels above `seen` end (the step reaching it is cut to it), levels it adds
/// start now; steps idle longer than `timeout` merge into one (every level of them is spare, the
/// highest since the latest of them), and past [`SPARE_STEPS`] the oldest of the others merges
/// into the next, which only makes its levels younger (never a bot to spare too soon).
pub fn spare_after(
    last: &[(DateTime<Utc>, u32)],
    seen: u32,
    now: DateTime<Utc>,
    timeout: chrono::TimeDelta,
) -> Vec<(DateTime<Utc>, u32)> {
    let mut steps = Vec::new();
    for &(since, n) in last {
        if n >= seen {
            if seen > 0 {
                steps.push((since, seen));
            }
            break;
        }
        steps.push((since, n));
    }
    if seen > steps.last().map_or(0, |s| s.1) {
        steps.push((now, seen));
    }
    let long = steps.iter().take_while(|s| s.0 + timeout <= now).count();
    steps.drain(..long.saturating_sub(1));
    let first_young = usize::from(long > 0);
    while steps.len() > SPARE_STEPS {
        steps.remove(first_young);
    }
    steps
}

/// How many bots the steps `spare` hold idle longer than `timeout` at `now`.
pub fn spare_long(spare: &[(DateTime<Utc>, u32)], now: DateTime<Utc>, timeout: chrono::TimeDelta) -> u32 {
    spare.iter().rev().find(|s| s.0 + timeout <= now).map_or(0, |s| s.1)
}

impl DemandState {
    /// The state after reading `r` for a Config with demand `d` at `now` (`last`: the state it
    /// had): the target is `busy + ⌈pending / per_bot⌉ + min_idle`; below the live VMs it goes
    /// down only by the bots idle longer than `idle_timeout`, or, with a warm pool (`r.parks`),
    /// by its bots to spare if more (those idle together at every reading of the last
    /// `idle_timeout`; VMs booting count as capacity, drained ones do not). Pending tasks found
    /// beside bots idle past `idle_timeout` for another `idle_timeout` are tasks these bots do
    /// not take: not counted.
    pub fn read(d: &Demand, r: Reading, last: Option<&DemandState>, now: DateTime<Utc>) -> Self {
        let per_bot = d.per_bot.max(1);
        let timeout = d.idle_timeout.chrono();
        let spare = match r.parks {
            true => spare_after(last.map_or(&[][..], |l| &l.spare), r.seen_idle, now, timeout),
            false => Vec::new(),
        };
        let shed = r.idle_long.max(spare_long(&spare, now, timeout)).min(r.idle);
        let unserved_since = match r.pending > 0 && r.idle_long > 0 {
            true => Some(last.and_then(|l| l.unserved_since).unwrap_or(now)),
            false => None,
        };
        let unserved = unserved_since.is_some_and(|t| t + d.idle_timeout.chrono() <= now);
        let pending = if unserved { 0 } else { r.pending };
        let work = r.busy.saturating_add(pending.div_ceil(per_bot));
        let wanted = work.saturating_add(d.min_idle);
        let floor = r.live.saturating_sub(shed);
        let (target, mut why) = match wanted >= floor {
            true => (wanted, format!("busy {} + pending {} + min_idle {}", r.busy, pending, d.min_idle)),
            false => (
                floor,
                format!(
                    "busy {} + pending {} + min_idle {} = {wanted}; {} idle ≤ {}: kept until idle longer",
                    r.busy,
                    pending,
                    d.min_idle,
                    r.idle - shed,
                    d.idle_timeout
                ),
            ),
        };
        if shed > r.idle_long {
            why.push_str(&format!("; {shed} idle together at every reading of the last {}", d.idle_timeout));
        }
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
            spare,
        }
    }

    /// The state when Swarming cannot be read at `now` (`what` says why): the last target is held,
    /// never shrunk (none yet: `hold`, the amount it has now); its bots to spare are counted
    /// again from the next reading (what happened meanwhile is unknown).
    pub fn held(last: Option<&DemandState>, hold: u32, what: &str, now: DateTime<Utc>) -> Self {
        let mut s = last.cloned().unwrap_or(Self { target: hold, live: hold, ..Self::default() });
        s.spare.clear();
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
