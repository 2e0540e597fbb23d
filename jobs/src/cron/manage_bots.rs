//! `manage_bots`: VMs whose deadline has come (the store's deadline index) → `manage_bot`, and
//! a slow sweep of every VM with an instance, each once per `timing.sweep`, spread evenly over
//! it (the safety net: a VM's bot is otherwise looked at when its observation changes, when its
//! deadline or timeout is due, or when something asks). Cost per tick: the due VMs and a
//! `1/(sweep/tick)` slice of the fleet, whatever its size. An index it cannot read (being rebuilt:
//! `heal`) skips its part this tick; the other part goes on.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use crate::env::Ports;
use crate::work::ManageBot;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::ports::store::{Expect, VmIndex};

/// Mark space of sweep positions: key `manage_bots`, the time the last tick swept up to.
const SWEEP: &str = "sweep";
/// Mark space of one-time store migrations.
const MIGRATIONS: &str = "migrations";
/// VMs written before the deadline index were indexed (by writing each once).
const DEADLINES: &str = "deadline_index";

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    index_older_vms(ctx).await?;
    let now = ctx.now();
    let mut ids: BTreeSet<String> = BTreeSet::new();
    // Deadlines: not while paused (a paused Config keeps its healthy VMs past their deadline;
    // resuming looks at them).
    if crate::safety::pause::global(&**store).await?.is_none() {
        let paused: BTreeSet<String> = ctx
            .ports
            .store
            .configs()
            .await?
            .into_iter()
            .filter(|c| c.value.paused.is_some())
            .map(|c| c.value.config.prefix)
            .collect();
        let due =
            crate::safety::heal::or_skip(ctx, "manage_bots", None, store.vm_ids(VmIndex::DueBy(now)).await)
                .await?;
        ids.extend(
            due.into_iter()
                .flatten()
                .filter(|id| crate::naming::parse_id(id).is_none_or(|(prefix, _)| !paused.contains(prefix))),
        );
    }
    // The sweep: the VMs whose place in the period lies between the last tick and this one.
    let period = ctx.settings.timing.sweep.0.max(60) as i64 * 1000;
    let last = store.marks(SWEEP).await?.into_iter().find(|(k, _)| k == "manage_bots").map(|(_, t)| t);
    if let Some(from) = last {
        let swept =
            crate::safety::heal::or_skip(ctx, "manage_bots", None, store.vm_ids(VmIndex::Created).await)
                .await?;
        ids.extend(swept.into_iter().flatten().filter(|id| in_window(place(id, period), from, now, period)));
    }
    store.unmark(SWEEP, "manage_bots").await?;
    store.mark(SWEEP, "manage_bots", now).await?;
    ctx.push_many(&ids.into_iter().map(|id| ManageBot { id }).collect::<Vec<_>>()).await
}

/// Where in the sweep period (ms) VM `id` comes: a stable spread (FNV-1a of its id).
fn place(id: &str, period: i64) -> i64 {
    let h =
        id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    (h % period as u64) as i64
}

/// Whether place `p` of the period was passed between `from` (excluded) and `to`.
fn in_window(p: i64, from: DateTime<Utc>, to: DateTime<Utc>, period: i64) -> bool {
    let (a, b) = (from.timestamp_millis(), to.timestamp_millis());
    if b - a >= period {
        return true;
    }
    let (a, b) = (a.rem_euclid(period), b.rem_euclid(period));
    if a <= b { a < p && p <= b } else { p > a || p <= b }
}

/// Once per store: VMs written by a build without the deadline index are written again as they
/// are, which indexes them; only those with an instance the index lacks (a store this build
/// filled, or a fleet made before its first tick, has none: nothing is written). (Not while an
/// index is being rebuilt: the next tick does it.)
async fn index_older_vms(ctx: &Ctx) -> Result<(), TaskError> {
    if ctx.ports.store.marks(MIGRATIONS).await?.iter().any(|(k, _)| k == DEADLINES) {
        return Ok(());
    }
    let read = ctx.ports.store.vm_ids(VmIndex::Created).await;
    let Some(created) = crate::safety::heal::or_skip(ctx, "manage_bots", None, read).await? else {
        return Ok(());
    };
    let read = ctx.ports.store.vm_ids(VmIndex::DueBy(DateTime::<Utc>::MAX_UTC)).await;
    let Some(indexed) = crate::safety::heal::or_skip(ctx, "manage_bots", None, read).await? else {
        return Ok(());
    };
    let indexed: BTreeSet<String> = indexed.into_iter().collect();
    for id in created.into_iter().filter(|id| !indexed.contains(id)) {
        if let Some(cur) = ctx.vm(&id).await?.filter(|c| c.value.deadline().is_some()) {
            // Written since (indexed then) if the version moved on: nothing to do.
            let (old, mut vm) = (cur.value.meter.clone(), cur.value);
            crate::records::meter::put(ctx, old.as_ref(), &mut vm, Expect::Version(cur.version)).await?;
        }
    }
    ctx.ports.store.mark(MIGRATIONS, DEADLINES, ctx.now()).await?;
    Ok(())
}

#[cfg(test)]
mod tests;
