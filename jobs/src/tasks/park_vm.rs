//! `park_vm`: brings a VM's warm state in line with its Config. A VM its Config wants again is
//! woken (`resume`, or `start` after a stop) and taken off the Config's `waking`; a VM it keeps
//! warm is parked (`suspend` for the first `warm.suspended` indexes kept warm, `stop` for the
//! rest) once its bot runs no task (asked of Swarming right before, so no task is cut short; a
//! busy bot is looked at again later), and a VM made for the warm pool once its bot has
//! connected; any other is handed to `drain_vm`.

use crate::env::Ports;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::parked::Park;
use crate::model::{ConfigRecord, Vm};
use crate::work::{DrainVm, ManageBot, Next, ParkVm};
use crate::records::writes::update_config;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: ParkVm) -> Result<Next, TaskError> {
    let Ports { store, bots, .. } = &ctx.ports;
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = cur.value.clone();
    if vm.destroying.is_some() {
        return Ok(Next::Done);
    }
    let provider = ctx.providers.get(ctx, &vm.provider).await?;
    let config = store.config(&vm.config).await?.map(|c| c.value);
    // A wake under way is finished whatever happened since (drained, let go again): a VM is
    // never left half awake; then `manage_bot` and `drain_vm` take it from there.
    if vm.parked.as_ref().is_some_and(|p| p.waking.is_some()) {
        return woken(ctx, provider.wake(ctx, cur).await?, &vm, config.as_ref()).await;
    }
    let Some(rec) = config else {
        ctx.push(&DrainVm { id: vm.id }).await?;
        return Ok(Next::Done);
    };
    if vm.drained {
        return Ok(Next::Done);
    }
    let now = ctx.now();
    if rec.keeps(&vm, ctx.providers.declared()) {
        if vm.parked.is_none() {
            return woken(ctx, Next::Done, &vm, Some(&rec)).await;
        }
        // Held: resuming the Config pushes its expansion, which asks again.
        if crate::safety::pause::paused(ctx, Some(&rec)).await?.is_some() {
            return Ok(Next::Done);
        }
        return woken(ctx, provider.wake(ctx, cur).await?, &vm, Some(&rec)).await;
    }
    if !rec.keeps_warm(&vm, ctx.providers.declared(), now) {
        ctx.push(&DrainVm { id: vm.id }).await?;
        return Ok(Next::Done);
    }
    // Made for the warm pool: parked once its bot has connected (its start-up done), so that a
    // wake gives a bot ready for work.
    if vm.parked.is_none() && (vm.instance.is_none() || vm.connected.is_none()) {
        return Ok(Next::After(ctx.watch()));
    }
    // About to ask Compute to park it (first, or again after a failure): only an idle bot.
    // Swarming is asked now, not the last walk.
    if vm.parked.as_ref().is_none_or(|p| !p.done && p.operation.is_empty()) {
        let bot = bots.get(&vm.swarming, &vm.hostname).await?;
        if bot.as_ref().is_some_and(|b| !b.task_id.is_empty()) {
            return Ok(Next::After(ctx.watch()));
        }
    }
    let suspended = rec.config.warm.as_ref().map_or(0, |w| w.suspended) as usize;
    let place = rec.warm.range(..vm.index).count();
    let how = match &vm.parked {
        Some(p) => p.how,
        None if place < suspended => Park::Suspend,
        None => Park::Stop,
    };
    provider.park(ctx, cur, how).await
}

/// After a wake step of `vm` that returned `next`: once awake, its bot is looked at soon and its
/// index leaves its Config's `waking`.
async fn woken(ctx: &Ctx, next: Next, vm: &Vm, rec: Option<&ConfigRecord>) -> Result<Next, TaskError> {
    if next != Next::Done {
        return Ok(next);
    }
    if vm.parked.is_some() {
        ctx.push(&ManageBot { id: vm.id.clone() }).await?;
    }
    if rec.is_some_and(|r| r.waking.contains(&vm.index)) {
        update_config::<TaskError>(ctx, &vm.config, |r| Ok(r.waking.remove(&vm.index))).await?;
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
