//! `drain_vm`: marks a VM drained when its Config is gone or its index is past the amount. A
//! drained VM never sent to GCE is dropped at once; one with an instance is handed to
//! `manage_bot` (terminate, destroy, delete); one being inserted finishes first.

use gce_backend_queues::payload::{CreateInstance, DrainVm, ManageBot};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::tasks::update_vm;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: DrainVm) -> Result<(), TaskError> {
    let Some(cur) = ctx.store.vm(&t.id).await? else { return Ok(()) };
    let amount = ctx.store.config(&cur.value.config).await?.map(|c| c.value.current_amount);
    if amount.is_some_and(|a| cur.value.index < a) {
        return Ok(());
    }
    let Some(vm) = update_vm(ctx, &t.id, |v| {
        !v.drained && {
            v.drained = true;
            true
        }
    })
    .await?
    else {
        return Ok(());
    };
    if !vm.url.is_empty() {
        ctx.push(&ManageBot { id: vm.id }).await?;
    } else if vm.insert_sent.is_none() {
        if let Some(cur) = ctx.store.vm(&t.id).await?
            && cur.value.url.is_empty()
            && cur.value.insert_sent.is_none()
        {
            ctx.store.delete_vm(&t.id, cur.version).await?;
        }
    } else {
        ctx.push(&CreateInstance { id: vm.id }).await?;
    }
    Ok(())
}
