//! `delete_bot`: deletes a destroyed VM's bot from Swarming, then the VM record (guarded by the
//! hostname, and by the removal of its machine having started: a static machine keeps its
//! hostname from one incarnation to the next, so a late task finds the next one not removed
//! and leaves it alone), and pushes `expand_config` so a replacement starts at once if still wanted, and
//! `count_vms` so the Config's status follows (and goes with the last VM of a removed Config).


use crate::env::Ports;
use crate::work::{CountVms, DeleteBot, ExpandConfig, Next};
use crate::ctx::Ctx;
use crate::error::TaskError;


/// Handles one task.
pub async fn run(ctx: &Ctx, t: DeleteBot) -> Result<Next, TaskError> {
    let Ports { bots, .. } = &ctx.ports;
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    if cur.value.hostname != t.hostname || cur.value.destroying.is_none() {
        return Ok(Next::Done);
    }
    bots.delete(&cur.value.swarming, &t.hostname).await?;
    if !crate::records::meter::delete(ctx, &cur).await? {
        return Err(TaskError::Conflict(t.id));
    }
    tracing::info!(config = %cur.value.config, vm = %t.id, hostname = %t.hostname, zone = %cur.value.zone(), "VM deleted");
    ctx.push(&CountVms { prefix: cur.value.config.clone() }).await?;
    ctx.push(&ExpandConfig { prefix: cur.value.config }).await.map(|_| Next::Done)
}

#[cfg(test)]
mod tests;
