//! `inspect_swarming`: one ListBots walk of a Swarming server. Bots of our VMs are recorded as
//! observations and their VMs pushed to `manage_bot` (which then needs no GetBot); bots named like
//! our hostnames with no VM are marked as stale candidates for `delete_stale_bots`.

use std::collections::HashSet;

use crate::tasks::ManageBot;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::Observed;
use crate::naming::{parse_id, vm_id_of};
use crate::tasks::Next;

task!(
    /// Walk one Swarming server's bots.
    InspectSwarming, "inspect_swarming", { /// Swarming server URL.
    server }, |self| self.server.clone()
);

const STAGE: &str = "inspect_swarming";

/// Mark space of bots named like ours with no VM.
pub const STALE_BOTS: &str = "stale-bot";

/// Handles one task.
pub async fn run(ctx: &Ctx, t: InspectSwarming) -> Result<Next, TaskError> {
    let prefixes: HashSet<String> = crate::status::prefixes(&*ctx.store).await?.into_iter().collect();
    let mut cursor = None;
    loop {
        let (bots, next) = match ctx.bots.list(&t.server, cursor).await {
            Ok(page) => page,
            Err(e) => {
                // Said on every Config that uses this server, so its operators see why (in
                // words that stay the same while it lasts, so it is recorded once).
                let msg = match e.kind {
                    crate::ports::bots::BotErrorKind::Unavailable => format!(
                        "Swarming server {} is unavailable (no answer, 5xx or a malformed answer): its bots are not seen until it answers",
                        t.server
                    ),
                    _ => format!("Swarming server {} refuses ListBots: {e}", t.server),
                };
                for p in users(ctx, &t.server).await? {
                    ctx.record_once(&p, STAGE, "swarming_unavailable", &msg).await?;
                }
                return Err(e.into());
            }
        };
        let now = ctx.now();
        let names: Vec<String> = bots.iter().map(|b| b.id.clone()).collect();
        let vms = ctx.store.vms_by_hostname(&names).await?;
        let mut seen = Vec::new();
        let mut manage = Vec::new();
        for (bot, vm) in bots.into_iter().zip(vms) {
            match vm {
                Some(id) => {
                    manage.push(ManageBot { id });
                    seen.push(Observed { bot, at: now });
                }
                None => {
                    let ours =
                        vm_id_of(&bot.id).and_then(parse_id).is_some_and(|(p, _)| prefixes.contains(p));
                    if ours && !bot.deleted {
                        let first =
                            ctx.store.mark(STALE_BOTS, &format!("{}|{}", t.server, bot.id), now).await?;
                        if first == now {
                            ctx.telemetry.cleanup("stale_bot", "found");
                        }
                    }
                }
            }
        }
        ctx.store.put_bots(&seen).await?;
        ctx.push_many(&manage).await?;
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    for p in users(ctx, &t.server).await? {
        ctx.resolved(&p, &[STAGE]).await?;
    }
    Ok(Next::Done)
}

/// Prefixes of the Configs that use `server`.
async fn users(ctx: &Ctx, server: &str) -> Result<Vec<String>, TaskError> {
    let configs = ctx.store.configs().await?.into_iter();
    Ok(configs.filter(|c| c.value.config.swarming == server).map(|c| c.value.config.prefix).collect())
}
