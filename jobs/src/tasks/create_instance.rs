//! `create_instance`: makes a VM's machine and records it, through the VM's provider
//! (`providers/`; Compute Engine: `providers/gce.rs`, where inserts, operations, adoption and
//! the handling of quota, stockout and invalid requests live).
//!
//! * Gone, or its machine already recorded: nothing to make (the bot is looked at).
//! * Not sent yet and neither wanted nor kept warm any more (the amount dropped, drained): the record is dropped,
//!   since nothing exists to clean up.
//! * Paused Config: a VM not yet sent waits (resuming pushes this task again); one already
//!   sent is followed to its end.
//! * Otherwise its provider takes one step; `created` records the machine once it exists.


use crate::work::{CreateInstance, ManageBot, Next};
use gce_backend_queues::Task;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{ConfigRecord, Vm};


/// The stage its errors are recorded under: the queue's name.
const STAGE: &str = CreateInstance::QUEUE;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: CreateInstance) -> Result<Next, TaskError> {
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = &cur.value;
    if vm.instance.is_some() {
        ctx.push(&ManageBot { id: t.id }).await?;
        return Ok(Next::Done);
    }
    if vm.insert_sent.is_none() {
        // Not sent yet: still wanted, or kept warm? (The amount may have dropped since it was made.)
        let (providers, now) = (ctx.providers.declared(), ctx.now());
        let made = |c: &ConfigRecord| c.keeps(vm, providers) || c.keeps_warm(vm, providers, now);
        let cfg = ctx.store.config(&vm.config).await?.filter(|c| made(&c.value));
        let Some(cfg) = cfg.filter(|_| !vm.drained) else {
            // Never sent to GCE: there is nothing to clean up.
            let unsent = |v: &Vm| v.insert_sent.is_none();
            return crate::writes::drop_uncreated(ctx, &vm.id, unsent).await.map(|()| Next::Done);
        };
        if crate::pause::held(ctx, &cfg.value, Some(&vm.id)).await?.is_some() {
            return Ok(Next::Done);
        }
        // No machine is told of a server the settings do not list (a record from before them).
        if let Err(why) = ctx.trust.server(&vm.swarming) {
            let msg = format!("VM {} not made: its Swarming {why}", vm.id);
            ctx.record_once(&vm.config, STAGE, "untrusted", &msg).await?;
            return Ok(Next::Done);
        }
    }
    ctx.providers.get(ctx, &vm.provider).await?.create(ctx, cur).await
}

#[cfg(test)]
mod tests;
