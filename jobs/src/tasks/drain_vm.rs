//! `drain_vm`: marks a VM drained when its Config is gone, its index is past the amount, or its
//! machine comes from a provider the Config no longer names. A
//! drained VM never sent to GCE is dropped at once; one with an instance is handed to
//! `manage_bot` (terminate, destroy, delete); one being inserted finishes first.

use crate::tasks::{CreateInstance, ManageBot};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::Vm;
use crate::tasks::Next;
use crate::tasks::update_vm;

task!(
    /// Drain a VM whose Config shrank or went away.
    DrainVm, "drain_vm", { /// VM id.
    id }, |self| self.id.clone()
);

/// Handles one task.
pub async fn run(ctx: &Ctx, t: DrainVm) -> Result<Next, TaskError> {
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let config = ctx.store.config(&cur.value.config).await?;
    if config.is_some_and(|c| ctx.providers.keeps(&c.value, &cur.value)) {
        return Ok(Next::Done);
    }
    drain(ctx, &cur.value).await.map(|_| Next::Done)
}

/// Marks the VM `cur` (as last read) drained and hands it to the step that retires it: one
/// never sent to GCE is dropped at once, one with an instance goes to `manage_bot`, one being
/// inserted to `create_instance` to finish first. Returns the VM as written (`None`: gone).
/// Whether it should go is the caller's to decide (a shrink here, a recycle over the API).
pub async fn drain(ctx: &Ctx, cur: &Vm) -> Result<Option<Vm>, TaskError> {
    let Some(vm) = update_vm(ctx, &cur.id, |v| {
        !v.drained && {
            v.drained = true;
            true
        }
    })
    .await?
    else {
        return Ok(None);
    };
    if !cur.drained {
        tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "VM drained");
    }
    if vm.instance.is_some() {
        ctx.push(&ManageBot { id: vm.id.clone() }).await?;
    } else if vm.insert_sent.is_none() {
        crate::tasks::drop_uncreated(ctx, &vm.id, |v| v.insert_sent.is_none()).await?;
    } else {
        ctx.push(&CreateInstance { id: vm.id.clone() }).await?;
    }
    Ok(Some(vm))
}

#[cfg(test)]
mod tests;
