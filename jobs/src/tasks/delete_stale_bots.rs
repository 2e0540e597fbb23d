//! `delete_stale_bots`: deletes from one Swarming server the bots named like our hostnames that
//! have had no VM for `stale_bot_grace` since `inspect_swarming` first saw them.

use crate::env::Ports;
use crate::work::{DeleteStaleBots, Next};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::marks::STALE_BOTS;


/// Handles one task.
pub async fn run(ctx: &Ctx, t: DeleteStaleBots) -> Result<Next, TaskError> {
    let Ports { store, bots, .. } = &ctx.ports;
    let now = ctx.now();
    let grace = ctx.settings.timing.stale_bot_grace.chrono();
    for (key, first) in store.marks(STALE_BOTS).await? {
        let Some((server, bot)) = key.split_once('|') else { continue };
        if server != t.server || first + grace > now {
            continue;
        }
        if store.vms_by_hostname(&[bot.to_owned()]).await?[0].is_none() {
            bots.delete(server, bot).await?;
            ctx.metrics.cleanup("stale_bot", "deleted");
            tracing::info!(server, bot, "deleted a stale bot with no VM");
        }
        store.unmark(STALE_BOTS, &key).await?;
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
