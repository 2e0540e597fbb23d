//! `delete_bot`: deletes a destroyed VM's bot from Swarming, then the VM record (guarded by the
//! hostname), and pushes `expand_config` so a replacement starts at once if still wanted, and
//! `count_vms` so the Config's status follows (and goes with the last VM of a removed Config).

use gce_backend_queues::payload::{CountVms, DeleteBot, ExpandConfig};

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: DeleteBot) -> Result<(), TaskError> {
    let Some(cur) = ctx.store.vm(&t.id).await? else { return Ok(()) };
    if cur.value.hostname != t.hostname {
        return Ok(());
    }
    ctx.bots.delete(&cur.value.swarming, &t.hostname).await?;
    if !ctx.store.delete_vm(&t.id, cur.version).await? {
        return Err(TaskError::Conflict(t.id));
    }
    ctx.push(&CountVms { prefix: cur.value.config.clone() }).await?;
    ctx.push(&ExpandConfig { prefix: cur.value.config }).await.map(drop)
}
