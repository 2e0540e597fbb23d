//! `delete_stale_bots`: deletes from one Swarming server the bots named like our hostnames that
//! have had no VM for `stale_bot_grace` since `inspect_swarming` first saw them.

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::tasks::Next;
use crate::tasks::inspect_swarming::STALE_BOTS;

task!(
    /// Delete bots named like ours that have no VM, on one Swarming server.
    DeleteStaleBots, "delete_stale_bots", { /// Swarming server URL.
    server }, |self| self.server.clone()
);

/// Handles one task.
pub async fn run(ctx: &Ctx, t: DeleteStaleBots) -> Result<Next, TaskError> {
    let now = ctx.now();
    let grace = ctx.timing.stale_bot_grace.chrono();
    for (key, first) in ctx.store.marks(STALE_BOTS).await? {
        let Some((server, bot)) = key.split_once('|') else { continue };
        if server != t.server || first + grace > now {
            continue;
        }
        if ctx.store.vms_by_hostname(&[bot.to_owned()]).await?[0].is_none() {
            ctx.bots.delete(server, bot).await?;
            ctx.telemetry.cleanup("stale_bot", "deleted");
            tracing::info!(server, bot, "deleted a stale bot with no VM");
        }
        ctx.store.unmark(STALE_BOTS, &key).await?;
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests {

    use super::*;

    #[tokio::test]
    async fn marked_bots_without_a_vm_are_deleted_after_the_grace_only_on_their_server() {
        let (ctx, f) = Ctx::test();
        let now = ctx.now();
        let server = "https://swarm.example.com";
        for key in [
            format!("{server}|linux-3-gone"),
            format!("{server}|linux-0-abcd"),
            "https://other|mac-1-x".to_owned(),
        ] {
            ctx.store.mark(STALE_BOTS, &key, now).await.unwrap();
        }
        ctx.seed_vm("linux-0", |_| {}).await; // linux-0-abcd has a VM again
        run(&ctx, DeleteStaleBots { server: server.into() }).await.unwrap();
        assert!(f.bots.calls().is_empty(), "not before the grace");
        f.clock.advance(ctx.timing.stale_bot_grace.chrono() + chrono::Duration::seconds(1));
        run(&ctx, DeleteStaleBots { server: server.into() }).await.unwrap();
        assert_eq!(f.bots.calls(), ["delete linux-3-gone"], "the one with a VM is kept");
        let left: Vec<String> =
            ctx.store.marks(STALE_BOTS).await.unwrap().into_iter().map(|(k, _)| k).collect();
        assert_eq!(left, ["https://other|mac-1-x"], "the other server's mark waits for its own task");
    }
}
