//! `drain_vm`: marks a VM drained when its Config is gone, its index is past the amount, or its
//! machine comes from a provider the Config no longer names. A
//! drained VM never sent to GCE is dropped at once; one with an instance is handed to
//! `manage_bot` (terminate, destroy, delete); one being inserted finishes first.


use crate::work::{DrainVm, Next};
use crate::ctx::Ctx;
use crate::error::TaskError;


/// Handles one task.
pub async fn run(ctx: &Ctx, t: DrainVm) -> Result<Next, TaskError> {
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let config = ctx.store.config(&cur.value.config).await?;
    if config.is_some_and(|c| c.value.keeps(&cur.value, ctx.providers.declared())) {
        return Ok(Next::Done);
    }
    crate::lifecycle::drain(ctx, &cur.value).await.map(|_| Next::Done)
}

#[cfg(test)]
mod tests;
