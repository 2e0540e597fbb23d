//! `park_vm`: brings a VM's warm state in line with its Config. A VM its Config wants again is
//! woken (`resume`, or `start` after a stop) and taken off the Config's `waking`; a VM it keeps
//! warm is parked (`suspend` for the first `warm.suspended` indexes kept warm, `stop` for the
//! rest) once its bot runs no task (asked of Swarming right before, so no task is cut short; a
//! busy bot is looked at again later); any other is handed to `drain_vm`.

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::parked::Park;
use crate::work::{DrainVm, ManageBot, Next, ParkVm};
use crate::writes::update_config;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: ParkVm) -> Result<Next, TaskError> {
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = cur.value.clone();
    let Some(rec) = ctx.store.config(&vm.config).await?.map(|c| c.value) else {
        ctx.push(&DrainVm { id: vm.id }).await?;
        return Ok(Next::Done);
    };
    if vm.drained || vm.instance.is_none() || vm.destroying.is_some() {
        return Ok(Next::Done);
    }
    let provider = ctx.providers.get(ctx, &vm.provider).await?;
    let now = ctx.now();
    if rec.keeps(&vm, ctx.providers.declared()) {
        if vm.parked.is_some() {
            let next = provider.wake(ctx, cur).await?;
            if next != Next::Done {
                return Ok(next);
            }
            // Awake: its bot comes back by itself; look at it soon.
            ctx.push(&ManageBot { id: vm.id.clone() }).await?;
        }
        if rec.waking.contains(&vm.index) {
            update_config::<TaskError>(ctx, &vm.config, |r| Ok(r.waking.remove(&vm.index))).await?;
        }
        return Ok(Next::Done);
    }
    if !rec.keeps_warm(&vm, ctx.providers.declared(), now) {
        ctx.push(&DrainVm { id: vm.id }).await?;
        return Ok(Next::Done);
    }
    if vm.parked.is_none() {
        // Only an idle bot is parked: Swarming is asked now, not the last walk.
        let bot = ctx.bots.get(&vm.swarming, &vm.hostname).await?;
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

#[cfg(test)]
mod tests;
