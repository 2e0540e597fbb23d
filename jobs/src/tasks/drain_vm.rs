//! `drain_vm`: marks a VM drained when its Config is gone, no longer wants it, or its machine
//! comes from a provider the Config no longer names. A VM its Config keeps warm is handed to
//! `park_vm` instead (unless past its deadline or made from older attributes: those go). A
//! drained VM never sent to GCE is dropped at once; one with an instance is handed to
//! `manage_bot` (terminate, destroy, delete); one being inserted finishes first.


use crate::env::Ports;
use crate::work::{DrainVm, Next, ParkVm};
use crate::ctx::Ctx;
use crate::error::TaskError;


/// Handles one task.
pub async fn run(ctx: &Ctx, t: DrainVm) -> Result<Next, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let config = store.config(&cur.value.config).await?.map(|c| c.value);
    let vm = &cur.value;
    if config.as_ref().is_some_and(|c| c.keeps(vm, ctx.providers.declared())) {
        return Ok(Next::Done);
    }
    if let Some(c) = &config
        && c.keeps_warm(vm, ctx.providers.declared(), ctx.now())
        && !vm.drained
    {
        ctx.push(&ParkVm { id: vm.id.clone() }).await?;
        return Ok(Next::Done);
    }
    crate::fleet::lifecycle::drain(ctx, vm).await.map(|_| Next::Done)
}

#[cfg(test)]
mod tests;
