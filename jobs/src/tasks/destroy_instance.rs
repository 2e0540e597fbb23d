//! `destroy_instance`: deletes a VM's instance (guarded by its URL, so a late task cannot touch
//! the next incarnation) with a deterministic requestId, follows the operation, then pushes
//! `delete_bot`.

use std::time::Duration;

use gce_backend_queues::payload::{DeleteBot, DestroyInstance};

use crate::ctx::{Ctx, request_id};
use crate::error::TaskError;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: DestroyInstance) -> Result<(), TaskError> {
    let Some(cur) = ctx.store.vm(&t.id).await? else { return Ok(()) };
    let vm = cur.value;
    if vm.url != t.url {
        return Ok(());
    }
    let rid = request_id(&format!("destroy-{}", vm.hostname));
    let op = match ctx.compute.delete(vm.project(), vm.zone(), &vm.hostname, &rid).await {
        Ok(op) => op,
        Err(e) => {
            ctx.record(&vm.config, "destroy_instance", &e.code, &e.message, vm.zone(), "").await?;
            return Err(e.into());
        }
    };
    if let Some(op) = op {
        let op = if op.done { op } else { ctx.compute.wait(vm.project(), vm.zone(), &op.name).await? };
        if !op.done {
            return ctx.again(&t, Duration::from_secs(2)).await;
        }
        if let Some(e) = op.error {
            ctx.record(&vm.config, "destroy_instance", &e.code, &e.message, vm.zone(), &op.name).await?;
            return Err(e.into());
        }
    }
    ctx.push(&DeleteBot { id: vm.id, hostname: vm.hostname }).await.map(drop)
}
