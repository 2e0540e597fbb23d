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
use crate::model::rollout::Rollout;
use crate::model::{ConfigRecord, Vm};
use crate::ports::store::Expect;

/// One step of Config `prefix`'s rollout (it is marked): retires what may go now, records the
/// progress, and clears the mark when no outdated VM is left. `ids`: its VM ids as the caller
/// read them. Returns whether the rollout goes on. Reads every VM record of the Config.
pub async fn step(ctx: &Env, prefix: &str, ids: &[String]) -> Result<bool, TaskError> {
    let Some(cur) = ctx.store.config(prefix).await? else { return Ok(false) };
    let Some(mark) = cur.value.rollout.clone() else { return Ok(false) };
    let c = &cur.value.config;
    let (mut healthy, mut updated, mut updated_up, mut retiring) = (0u32, 0u32, 0u32, 0u32);
    let (mut serving, mut idle) = (Vec::new(), Vec::new());
    for id in ids {
        let Some(v) = ctx.store.vm(id).await? else { continue };
        let vm = v.value;
        let up = vm.serving();
        if !outdated(c, &vm) {
            updated += u32::from(!vm.drained);
            // Those that stay once the surge goes.
            updated_up += u32::from(up && vm.index < cur.value.current_amount);
            healthy += u32::from(up);
        } else if vm.drained {
            retiring += 1;
        } else {
            if up {
                healthy += 1;
                serving.push(vm);
            } else {
                idle.push(vm);
            }
        }
    }
    let outdated_left = u32::try_from(serving.len() + idle.len()).unwrap_or(u32::MAX);
    let progress = Rollout { updated, outdated: outdated_left, ..mark.clone() };
    // Done once every old VM is gone and the amount is served by new ones: only then may the
    // surge go (before, its bots stand in for those still on their way).
    let done = outdated_left == 0 && retiring == 0 && updated_up >= cur.value.current_amount;
    let rec = ConfigRecord { rollout: (!done).then_some(progress), ..cur.value.clone() };
    if rec != cur.value {
        if !ctx.store.put_config(&rec, Expect::Version(cur.version)).await? {
            return Ok(true); // changed under us: the next look
        }
        if done {
            let secs = (ctx.now() - mark.since).num_seconds();
            tracing::info!(config = %prefix, seconds = secs, vms = updated, "rolling update done: every VM has the new attributes");
            return Ok(false);
        }
    }
    // Retire: outdated VMs that serve nothing at once; serving ones while enough stay connected.
    let floor = crate::model::rollout::min_connected(cur.value.current_amount, &c.update);
    let may = healthy.saturating_sub(floor) as usize;
    serving.sort_by_key(|v| v.index);
    let chosen: Vec<Vm> = idle.into_iter().chain(serving.into_iter().take(may)).collect();
    if !chosen.is_empty() {
        tracing::info!(config = %prefix, retiring = chosen.len(), outdated = outdated_left, updated, healthy, "rolling update: retiring VMs made from older attributes");
    }
    for vm in &chosen {
        crate::lifecycle::drain(ctx, vm).await?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests;
