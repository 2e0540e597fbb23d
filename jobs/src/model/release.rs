//! Which VMs stay when a pool has more than it wants: the one rule of "idle first". A pool's
//! wanted VMs are the first `slots` indexes not let go ([`ConfigRecord::let_go`]); when it must
//! lose some, [`arrange`] lets go those whose loss costs least (no instance yet, a dead bot, the
//! longest idle, still booting), and a busy bot's VM last, so a task is never cut short and the
//! VMs kept are the ones doing work.
//!
//! [`ConfigRecord::let_go`]: super::ConfigRecord::let_go

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::records::{Observed, Vm};

/// How a live VM stands, in the order VMs are let go: the first goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Standing {
    /// No instance yet.
    NotMade,
    /// Its bot is dead or its instance down.
    Down,
    /// Its bot has run no task since this time (the longest idle goes first).
    Idle(DateTime<Utc>),
    /// Connected, but not seen by a walk of Swarming yet.
    Unknown,
    /// Its instance is there, its bot not yet.
    Booting,
    /// Its bot runs a task.
    Busy,
}

impl Standing {
    /// The standing of `vm` (not drained) with its last bot observation `seen`.
    pub fn of(vm: &Vm, seen: Option<&Observed>) -> Self {
        match (&vm.instance, &vm.fault, vm.connected, seen) {
            (None, ..) => Self::NotMade,
            (_, Some(_), ..) => Self::Down,
            (_, _, None, _) => Self::Booting,
            (_, _, Some(_), Some(o)) if o.bot.is_dead => Self::Down,
            (_, _, Some(_), Some(o)) if !o.bot.task_id.is_empty() => Self::Busy,
            (_, _, Some(_), Some(o)) => Self::Idle(o.idle_since.unwrap_or(o.at)),
            (_, _, Some(_), None) => Self::Unknown,
        }
    }
}

/// The indexes to let go so that a pool wanting `slots` VMs keeps the best of its `live` ones
/// (index and standing; drained VMs are not live) and fills the rest with fresh indexes, lowest
/// first, below `limit` (the indexes its hostnames have room for) and none of them `taken` (an
/// index whose drained VM is still there: it is made again only once that one is gone, so taken
/// ones come after the free ones below `limit`). Returns the let-go set: every index below the
/// highest wanted one that is not wanted. Among equals the highest index goes first, so a pool
/// of equals keeps `0..slots` and lets nothing go.
pub fn arrange(slots: u32, live: &[(u32, Standing)], taken: &BTreeSet<u32>, limit: u32) -> BTreeSet<u32> {
    let mut order: Vec<&(u32, Standing)> = live.iter().collect();
    // Best kept first: the reverse of the order they go in.
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut wanted: BTreeSet<u32> = order.iter().take(slots as usize).map(|(i, _)| *i).collect();
    let used: BTreeSet<u32> = live.iter().map(|(i, _)| *i).chain(taken.iter().copied()).collect();
    let free = (0..limit).filter(|i| !used.contains(i));
    let mut fresh = free
        .chain(taken.iter().copied().filter(|i| *i < limit))
        .chain((limit..=u32::MAX).filter(|i| !used.contains(i)));
    while (wanted.len() as u32) < slots {
        let Some(i) = fresh.next() else { break };
        wanted.insert(i);
    }
    let Some(&top) = wanted.last() else { return BTreeSet::new() };
    (0..top).filter(|i| !wanted.contains(i)).collect()
}

#[cfg(test)]
mod tests;
