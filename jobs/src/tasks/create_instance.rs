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
//!   (Compute Engine: a first insert while many of the Config's VMs wait goes in a bulk, by
//!   `bulk_insert`; a VM in a bulk is followed there.)


use crate::env::Ports;
use crate::work::{CreateInstance, ManageBot, Next};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::fleet::lifecycle::sendable;


/// Handles one task.
pub async fn run(ctx: &Ctx, t: CreateInstance) -> Result<Next, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = &cur.value;
    if vm.instance.is_some() {
        ctx.push(&ManageBot { id: t.id }).await?;
        return Ok(Next::Done);
    }
    if vm.insert_sent.is_none() {
        // Not sent yet: still made (wanted, or kept warm), not paused, trusted?
        let cfg = store.config(&vm.config).await?;
        let cfg = cfg.as_ref().map(|c| &c.value);
        let paused = crate::safety::pause::paused(ctx, cfg).await?;
        if !sendable(ctx, ctx.providers.declared(), cfg, paused.as_ref(), vm).await? {
            return Ok(Next::Done);
        }
    }
    ctx.providers.get(ctx, &vm.provider).await?.create(ctx, cur).await
}

#[cfg(test)]
mod tests;
