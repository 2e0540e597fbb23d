//! `terminate_bot`: asks Swarming to terminate a VM's bot after its current task, once per
//! `terminate_again_after`, then watches it through `manage_bot`.

use gce_backend_queues::payload::{ManageBot, TerminateBot};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::tasks::update_vm;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: TerminateBot) -> Result<(), TaskError> {
    let Some(cur) = ctx.store.vm(&t.id).await? else { return Ok(()) };
    let vm = cur.value;
    let now = ctx.now();
    if vm.hostname != t.hostname
        || vm.terminate_sent.is_some_and(|s| s + ctx.timing.terminate_again_after.chrono() > now)
    {
        return Ok(());
    }
    ctx.bots.terminate(&vm.swarming, &vm.hostname).await?;
    update_vm(ctx, &vm.id, |v| {
        v.hostname == t.hostname && {
            v.terminate_sent = Some(now);
            true
        }
    })
    .await?;
    ctx.again(&ManageBot { id: vm.id }, ctx.watch()).await
}
