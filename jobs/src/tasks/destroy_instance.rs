//! `destroy_instance`: removes a VM's machine through its provider (guarded by the instance URL,
//! so a late task cannot touch the next incarnation; Compute Engine: a delete with a
//! deterministic requestId, its operation recorded and followed, the task going back to its
//! queue between looks), then pushes `delete_bot`.

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::metrics::Stage;
use crate::work::{DeleteBot, DestroyInstance, Next};
use crate::records::writes::update_vm;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: DestroyInstance) -> Result<Next, TaskError> {
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = cur.value;
    if vm.url() != Some(t.url.as_str()) {
        return Ok(Next::Done);
    }
    let now = ctx.now();
    let vm = match vm.destroying {
        Some(_) => vm,
        None => {
            let started = update_vm(ctx, &vm.id, |v| {
                v.instance == vm.instance && v.destroying.is_none() && {
                    v.destroying = Some(now);
                    true
                }
            })
            .await?;
            match started {
                Some(v) if v.instance == vm.instance => v,
                _ => return Ok(Next::Done),
            }
        }
    };
    // Its provider removes the machine (Compute Engine: a delete, its operation followed).
    let provider = ctx.providers.get(ctx, &vm.provider).await?;
    let next = provider.remove(ctx, vm.clone()).await?;
    if next != Next::Done {
        return Ok(next);
    }
    // A machine that outlives its VM (static) is released, not destroyed.
    let fixed = provider.machines_outlive_vms();
    let done = if fixed { "static machine released (left running)" } else { "instance destroyed" };
    tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "{done}");
    ctx.resolved(&vm.config, &["destroy_instance"]).await?;
    let pushed = ctx.push(&DeleteBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await?;
    // Counted once per instance: a run again before `delete_bot` (a retry, a duplicate task)
    // finds its DeleteBot already there. A static machine is released, not deleted.
    if pushed.added() && !fixed {
        ctx.metrics.instance_op(&vm, "delete", "ok", "");
        if let Some(placed) = &vm.instance {
            ctx.metrics.lifecycle(&vm, Stage::Lifetime, placed.created, ctx.now());
        }
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
