//! Rolling updates, in one place. When a Config's instance attributes change (image, machine
//! type, metadata, zones, …) and its update mode is `rolling`, the Config is marked in the same
//! write. While marked, it wants `max_surge` VMs more than its amount (made from the new
//! attributes), and each `expand_config` run retires VMs made from older attributes while at
//! least `amount - max_unavailable` bots stay connected: drained like any other (the bot
//! finishes its task, then the instance goes), each index made again from the new attributes.
//! Outdated VMs whose bot is not connected go at once (they serve nothing). When none is left and
//! the amount is served by new VMs, the mark goes, and with it the surge. A change of the amount
//! alone rolls nothing.

use crate::env::Env;
use crate::error::TaskError;
use crate::model::outdated;
use crate::model::rollout_mark::Rollout;
use crate::model::{ConfigRecord, Vm};
use crate::ports::store::Expect;

/// One step of Config `prefix`'s rollout (it is marked): retires what may go now, records the
/// progress, and clears the mark when no outdated VM is left. `ids`: its VM ids as the caller
/// read them. Returns whether the rollout goes on. Reads every VM record of the Config.
pub async fn step(ctx: &Env, prefix: &str, ids: &[String]) -> Result<bool, TaskError> {
    let Some(cur) = ctx.ports.store.config(prefix).await? else { return Ok(false) };
    let Some(mark) = cur.value.rollout.clone() else { return Ok(false) };
    let c = &cur.value.config;
    let amount = cur.value.current_amount;
    let (mut standing, mut healthy) = (Standing::default(), 0u32);
    let (mut serving, mut idle) = (Vec::new(), Vec::new());
    for id in ids {
        let Some(v) = ctx.ports.store.vm(id).await? else { continue };
        let vm = v.value;
        // A VM kept warm (made for the pool, not parked yet) serves no one for long.
        let (old, up) = (outdated(c, &vm), vm.serving() && !cur.value.warm.contains(&vm.index));
        standing.add(&vm, old, cur.value.wants(vm.index) && !cur.value.in_surge(vm.index));
        if !old {
            healthy += u32::from(up);
        } else if !vm.drained {
            if up {
                healthy += 1;
                serving.push(vm);
            } else {
                idle.push(vm);
            }
        }
    }
    let (updated, outdated_left) = (standing.updated, standing.outdated);
    let progress = Rollout { updated, outdated: outdated_left, ..mark.clone() };
    let done = standing.done(amount);
    let rec = ConfigRecord { rollout: (!done).then_some(progress), ..cur.value.clone() };
    if rec != cur.value {
        if !ctx.ports.store.put_config(&rec, Expect::Version(cur.version)).await? {
            return Ok(true); // changed under us: the next look
        }
        if done {
            let secs = (ctx.now() - mark.since).num_seconds();
            tracing::info!(config = %prefix, seconds = secs, vms = updated, "rolling update done: every VM has the new attributes");
            return Ok(false);
        }
    }
    // Retire: outdated VMs that serve nothing at once; serving ones while enough stay connected.
    let floor = crate::model::rollout_mark::min_connected(amount, &c.update);
    let may = healthy.saturating_sub(floor) as usize;
    serving.sort_by_key(|v| v.index);
    let chosen: Vec<Vm> = idle.into_iter().chain(serving.into_iter().take(may)).collect();
    if !chosen.is_empty() {
        tracing::info!(config = %prefix, retiring = chosen.len(), outdated = outdated_left, updated, healthy, "rolling update: retiring VMs made from older attributes");
    }
    for vm in &chosen {
        crate::fleet::lifecycle::drain(ctx, vm).await?;
    }
    Ok(true)
}

/// Where a rollout stands, counted over its Config's VMs ([`Standing::add`]); its end is
/// [`Standing::done`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Standing {
    /// VMs of the new attributes, not being drained.
    pub updated: u32,
    /// VMs of the new attributes below the amount whose bot serves: those that stay once the
    /// surge goes.
    pub updated_up: u32,
    /// VMs of older attributes not yet drained.
    pub outdated: u32,
    /// VMs of older attributes being drained.
    pub retiring: u32,
}

impl Standing {
    /// Counts `vm`; `outdated`: made from older attributes ([`outdated`]); `in_amount`: its
    /// Config wants it within its amount, not for a rollout's surge ([`ConfigRecord::in_surge`]).
    ///
    /// [`ConfigRecord::in_surge`]: crate::model::ConfigRecord::in_surge
    pub fn add(&mut self, vm: &Vm, outdated: bool, in_amount: bool) {
        match (outdated, vm.drained) {
            (false, _) => {
                self.updated += u32::from(!vm.drained);
                self.updated_up += u32::from(vm.serving() && in_amount);
            }
            (true, true) => self.retiring += 1,
            (true, false) => self.outdated += 1,
        }
    }

    /// The one test of a rollout's end in a pool of `amount`: every old VM gone and the amount
    /// served by new ones; only then may the surge go (before, its bots stand in for those still
    /// on their way).
    pub fn done(&self, amount: u32) -> bool {
        self.outdated == 0 && self.retiring == 0 && self.updated_up >= amount
    }
}

#[cfg(test)]
mod tests;
