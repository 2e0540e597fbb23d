//! Which VMs stay when a pool has more than it wants: the one rule of "idle first". A pool's
//! wanted VMs are the first `slots` indexes not let go ([`ConfigRecord::let_go`]); when it must
//! lose some, [`arrange`] lets go those whose loss costs least (no instance yet, a dead bot, the
//! longest idle, still booting), and a busy bot's VM last, so a task is never cut short and the
//! VMs kept are the ones doing work.
//!
//! [`ConfigRecord::let_go`]: super::ConfigRecord::let_go

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::bots::Observed;
use super::records::{ConfigRecord, Vm};

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
        // Waking from the warm pool: as good as booting (its bot's last word is from before).
        if vm.parked.as_ref().is_some_and(|p| p.waking.is_some()) {
            return Self::Booting;
        }
        match (&vm.instance, &vm.fault, vm.connected, seen) {
            (None, ..) => Self::NotMade,
            (_, Some(_), ..) => Self::Down,
            (_, _, None, _) => Self::Booting,
            // Woken from the warm pool, its bot not back yet: booting, not dead.
            (_, _, Some(_), Some(o)) if o.bot.is_dead && vm.coming_back(o.bot.last_seen, None) => {
                Self::Booting
            }
            (_, _, Some(_), Some(o)) if o.bot.is_dead => Self::Down,
            (_, _, Some(_), Some(o)) if !o.bot.task_id.is_empty() => Self::Busy,
            // Idle since a walk first saw it so, or since its wake if later: a parked bot still
            // looks idle to Swarming, so the walks kept the time it went idle before its park,
            // and a VM just woken for work would otherwise be let go again first.
            (_, _, Some(_), Some(o)) => {
                let since = o.idle_since.unwrap_or(o.at);
                Self::Idle(vm.woken.map_or(since, |w| since.max(w)))
            }
            (_, _, Some(_), None) => Self::Unknown,
        }
    }
}

/// What a pool has, for [`arrange`].
#[derive(Debug, Clone, Copy)]
pub struct Pool<'a> {
    /// The VMs it wants (its amount, and a rollout's surge).
    pub slots: u32,
    /// Its live VMs (not drained, not parked): index and standing.
    pub live: &'a [(u32, Standing)],
    /// Its parked VMs that may be woken (not outdated, not past their deadline), best first.
    pub parked: &'a [u32],
    /// Indexes whose VM is still there but goes (drained, or parked and not to be woken).
    pub taken: &'a BTreeSet<u32>,
    /// The indexes its hostnames have room for.
    pub limit: u32,
    /// How many VMs it keeps warm at most.
    pub warm: u32,
    /// How many VMs its warm pool holds now ([`ConfigRecord::warm_stock`]; at most `warm`): when it
    /// keeps fewer, VMs on their way that it lets go are kept to be parked, then new ones made.
    pub stock: u32,
    /// Live VMs it keeps warm now (on their way to be parked): wanted only after the others, so
    /// a VM made for the warm pool does not displace a bot that is ready.
    pub kept: &'a BTreeSet<u32>,
}

/// What [`arrange`] decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arranged {
    /// Indexes below the highest wanted one that are not wanted.
    pub let_go: BTreeSet<u32>,
    /// Indexes kept warm: parked VMs kept, and idle ones to park.
    pub warm: BTreeSet<u32>,
    /// Parked VMs wanted again: to wake.
    pub wake: BTreeSet<u32>,
}

/// The pool `p` arranged: it keeps the best of its live VMs, wakes parked ones (lowest index
/// first) before it makes new ones, then fills the rest with fresh indexes, lowest first, below
/// `limit` and none taken (an index whose VM still goes is made again only once that one is
/// gone, so taken ones come after the free ones below `limit`). Of the VMs it lets go, it keeps
/// up to `warm` warm: parked ones first, then idle ones (the first to go first); the rest go.
/// A warm pool short of `stock` is filled: with the VMs it lets go that are on their way (not
/// down; the first to go first), then with new indexes below `limit`, to be parked once up. Live
/// VMs already `kept` warm are wanted only after every other live VM.
/// Among equals the highest index goes first, so a pool of equals keeps `0..slots` and lets
/// nothing go.
pub fn arrange(p: &Pool<'_>) -> Arranged {
    let mut order: Vec<&(u32, Standing)> = p.live.iter().collect();
    // Best kept first: the reverse of the order they go in; VMs kept warm after the others.
    let warm_now = |i: &u32| p.kept.contains(i);
    order.sort_by(|a, b| warm_now(&a.0).cmp(&warm_now(&b.0)).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)));
    let slots = p.slots as usize;
    let mut wanted: BTreeSet<u32> = order.iter().take(slots).map(|(i, _)| *i).collect();
    let need = slots.saturating_sub(wanted.len());
    let wake: BTreeSet<u32> = p.parked.iter().copied().take(need).collect();
    wanted.extend(&wake);
    let used: BTreeSet<u32> = p
        .live
        .iter()
        .map(|(i, _)| *i)
        .chain(p.taken.iter().copied())
        .chain(p.parked.iter().copied())
        .collect();
    let free = (0..p.limit).filter(|i| !used.contains(i));
    let taken = p.taken.iter().copied().filter(|i| *i < p.limit);
    let mut fresh = free.chain(taken).chain((p.limit..=u32::MAX).filter(|i| !used.contains(i)));
    while wanted.len() < slots {
        let Some(i) = fresh.next() else { break };
        wanted.insert(i);
    }
    // Kept warm: parked ones not woken, then idle ones let go, the first to go first.
    let idle = order
        .iter()
        .rev()
        .filter(|(i, s)| !wanted.contains(i) && matches!(s, Standing::Idle(_) | Standing::Unknown));
    let mut warm: BTreeSet<u32> = p
        .parked
        .iter()
        .copied()
        .filter(|i| !wake.contains(i))
        .chain(idle.map(|(i, _)| *i))
        .take(p.warm as usize)
        .collect();
    let stock = p.stock.min(p.warm) as usize;
    if warm.len() < stock {
        let coming = order
            .iter()
            .rev()
            .filter(|(i, s)| !wanted.contains(i) && !warm.contains(i) && *s != Standing::Down)
            .map(|(i, _)| *i);
        let new = (0..p.limit).filter(|i| !used.contains(i) && !wanted.contains(i));
        let short = stock - warm.len();
        warm.extend(coming.chain(new).take(short).collect::<Vec<_>>());
    }
    let let_go = match wanted.last() {
        Some(&top) => (0..top).filter(|i| !wanted.contains(i)).collect(),
        None => BTreeSet::new(),
    };
    Arranged { let_go, warm, wake }
}
/// Whether Config `rec` grew past the VMs it has (`present`: their indexes): it wants an index
/// above every one of them. (A VM made again under its index, as after its lifetime, is not.)
fn grew(rec: &ConfigRecord, present: &BTreeSet<u32>) -> bool {
    let top = present.last().copied();
    rec.wanted().iter().any(|i| !present.contains(i) && top.is_none_or(|t| *i > t))
}

/// Whether Config `rec`'s pool is arranged again ([`of_records`]): a VM it neither wants nor
/// keeps warm is still there undrained (`surplus`), it [`grew`] past its VMs (`present`: their
/// indexes) while some
/// index is let go or kept warm (they may be filled again), a wanted index is one kept warm (grown
/// into, or an index with no VM while some VM is kept warm: one is woken), or it keeps more warm
/// than its warm pool now allows or fewer than it holds
/// at `now` ([`ConfigRecord::warm_stock`]). Otherwise its wanted indexes stand as they are (a VM
/// made again under the same index needs no arranging).
pub fn must_arrange(rec: &ConfigRecord, surplus: bool, present: &BTreeSet<u32>, now: DateTime<Utc>) -> bool {
    if rec.config.is_static() {
        return false;
    }
    // A pool with no index let go or kept warm (most pools) lists its wanted indexes never.
    let holes = !rec.let_go.is_empty() || !rec.warm.is_empty();
    let room = rec.config.warm_room() as usize;
    // Growth while VMs are kept warm: into a warm index, or into one with no VM (a warm VM is
    // woken for it rather than a new one made).
    let grown_into_warm =
        || !rec.warm.is_empty() && rec.wanted().iter().any(|i| rec.warm.contains(i) || !present.contains(i));
    let short = || rec.warm.len() < rec.warm_stock(now) as usize;
    surplus || rec.warm.len() > room || short() || (holes && (grew(rec, present) || grown_into_warm()))
}

/// Config `rec`'s pool arranged from its VM records (`vms`) and their bots' last observations
/// (`seen`, in the same order) at `now`: drained VMs go; parked ones may be woken unless past
/// their deadline or made from older attributes (those go); the rest stand as their bots do.
/// What `expand_config` applies and a plan shows.
pub fn of_records(rec: &ConfigRecord, vms: &[Vm], seen: &[Option<Observed>], now: DateTime<Utc>) -> Arranged {
    let (mut live, mut parked, mut taken) = (Vec::new(), Vec::new(), BTreeSet::new());
    for (v, o) in vms.iter().zip(seen) {
        if v.drained {
            taken.insert(v.index);
        } else if v.parked.as_ref().is_some_and(|p| p.waking.is_none()) {
            match v.past_deadline(now) || super::outdated(&rec.config, v) {
                true => taken.insert(v.index),
                false => {
                    parked.push(v.index);
                    true
                }
            };
        } else {
            live.push((v.index, Standing::of(v, o.as_ref())));
        }
    }
    parked.sort_unstable();
    let warm = rec.config.warm_room();
    let limit = rec.config.index_room();
    let stock = rec.warm_stock(now);
    let kept = &rec.warm;
    arrange(&Pool {
        slots: rec.slots(),
        live: &live,
        parked: &parked,
        taken: &taken,
        limit,
        warm,
        stock,
        kept,
    })
}

#[cfg(test)]
mod tests;
