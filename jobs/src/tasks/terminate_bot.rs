//! `terminate_bot`: asks Swarming to terminate a VM's bot after its current task, once per
//! `terminate_again_after`, then watches it through `manage_bot`.


use crate::env::Ports;
use crate::work::{ManageBot, Next, TerminateBot};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::records::writes::update_vm;


/// Handles one task.
pub async fn run(ctx: &Ctx, t: TerminateBot) -> Result<Next, TaskError> {
    let Ports { bots, .. } = &ctx.ports;
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = cur.value;
    let now = ctx.now();
    if vm.hostname != t.hostname
        || vm.terminate_sent.is_some_and(|s| s + ctx.settings.timing.terminate_again_after.chrono() > now)
    {
        return Ok(Next::Done);
    }
    bots.terminate(&vm.swarming, &vm.hostname).await?;
    tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "bot asked to terminate after its task");
    update_vm(ctx, &vm.id, |v| {
        v.hostname == t.hostname && {
            v.terminate_sent = Some(now);
            true
        }
    })
    .await?;
    ctx.push_at(&ManageBot { id: vm.id }, gce_backend_queues::When::After(ctx.watch())).await?;
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
