//! `inspect_swarming`: one ListBots walk of a Swarming server. Bots of our VMs are recorded as
//! observations (so `manage_bot` needs no GetBot); a VM is pushed to `manage_bot` only when what
//! it acts on changed since the last walk (first connection, dead, deleted, terminated, silent:
//! [`crate::model::Condition`]) or its bot is no longer listed, so an idle fleet costs a walk and
//! no task. Bots named like our hostnames with no VM are marked as stale candidates for
//! `delete_stale_bots`.

use std::collections::HashSet;


use crate::env::Ports;
use crate::work::{InspectSwarming, ManageBot, Next};
use crate::ctx::Ctx;
use crate::model::marks::STALE_BOTS;
use crate::episodes::Held;
use crate::error::TaskError;
use crate::model::Observed;
use crate::{naming::parse_id, naming::vm_id_of};


const STAGE: &str = "inspect_swarming";

/// Handles one task.
pub async fn run(ctx: &Ctx, t: InspectSwarming) -> Result<Next, TaskError> {
    let Ports { store, bots: swarming, .. } = &ctx.ports;
    let prefixes: HashSet<String> = crate::fleet::status::prefixes(&**store).await?.into_iter().collect();
    let mut listed: HashSet<String> = HashSet::new();
    let mut cursor = None;
    loop {
        let (bots, next) = match swarming.list(&t.server, cursor).await {
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
                return cannot_walk(ctx, &t.server, e);
            }
        };
        let now = ctx.now();
        let names: Vec<String> = bots.iter().map(|b| b.id.clone()).collect();
        let vms = store.vms_by_hostname(&names).await?;
        let ours: Vec<String> =
            names.iter().zip(&vms).filter(|(_, vm)| vm.is_some()).map(|(n, _)| n.clone()).collect();
        let mut before = store.bots(&ours).await?.into_iter();
        listed.extend(names);
        let mut seen = Vec::new();
        let mut manage = Vec::new();
        for (bot, vm) in bots.into_iter().zip(vms) {
            match vm {
                Some(id) => {
                    let last = before.next().flatten();
                    let was = last.as_ref().map(|o| o.condition(ctx.silent_after()));
                    let now_seen = Observed::after(last.as_ref(), bot, now);
                    if was != Some(now_seen.condition(ctx.silent_after())) {
                        manage.push(ManageBot { id });
                    }
                    seen.push(now_seen);
                }
                None => {
                    let ours =
                        vm_id_of(&bot.id).and_then(parse_id).is_some_and(|(p, _)| prefixes.contains(p));
                    if ours && !bot.deleted {
                        let first =
                            store.mark(STALE_BOTS, &format!("{}|{}", t.server, bot.id), now).await?;
                        if first == now {
                            ctx.metrics.cleanup("stale_bot", "found");
                        }
                    }
                }
            }
        }
        store.put_bots(&seen).await?;
        ctx.push_many(&manage).await?;
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    if let Some(ended) = ctx.episodes.end(&episode(&t.server), tokio::time::Instant::now()) {
        tracing::info!(server = %t.server, failed = ended.held, lasted = ?ended.lasted, "Swarming server walked again");
    }
    let users = users(ctx, &t.server).await?;
    vanished(ctx, &listed, &users).await?;
    for p in users {
        ctx.resolved(&p, &[STAGE]).await?;
    }
    Ok(Next::Done)
}

/// After a whole walk: the VMs of this server's Configs (`users`) whose bot was observed before
/// and is no longer listed (deleted from Swarming) are looked at, once: their observation is
/// dropped. Observations of hostnames with no VM go too.
async fn vanished(ctx: &Ctx, listed: &HashSet<String>, users: &[String]) -> Result<(), TaskError> {
    let gone: Vec<String> = ctx.ports.store.observed().await?.into_iter().filter(|h| !listed.contains(h)).collect();
    if gone.is_empty() {
        return Ok(());
    }
    let mut forget = Vec::new();
    let mut manage = Vec::new();
    for (hostname, vm) in gone.iter().zip(ctx.ports.store.vms_by_hostname(&gone).await?) {
        match vm {
            Some(id) => {
                if parse_id(&id).is_some_and(|(p, _)| users.iter().any(|u| u == p)) {
                    manage.push(ManageBot { id });
                    forget.push(hostname.clone());
                }
            }
            None => forget.push(hostname.clone()),
        }
    }
    ctx.ports.store.forget_bots(&forget).await?;
    ctx.push_many(&manage).await.map(drop)
}

/// The episode of a Swarming server that cannot be walked.
fn episode(server: &str) -> String {
    format!("walk {server}")
}

/// A walk of `server` failed with `e` (already on its Configs' status): said once when it
/// starts, then summed up every minute while it lasts. Held back by the server's open breaker,
/// the task waits for it; otherwise it is done (the cron walks again on its next tick), so a
/// server that cannot be walked makes neither a WARN per walk nor dead tasks.
fn cannot_walk(ctx: &Ctx, server: &str, e: crate::ports::bots::BotError) -> Result<Next, TaskError> {
    match ctx.episodes.held(&episode(server), tokio::time::Instant::now()) {
        Held::Began => {
            tracing::warn!(server, error = %e, "Swarming server cannot be walked: its bots are not seen until it answers")
        }
        Held::Summary { held, over } => {
            tracing::info!(server, error = %e, over = ?over, "Swarming server still cannot be walked: {held} walks failed")
        }
        Held::Quiet => tracing::debug!(server, error = %e, "Swarming server cannot be walked"),
    }
    match e.retry_after {
        Some(_) => Err(e.into()),
        None => Ok(Next::Done),
    }
}

/// Prefixes of the Configs that use `server`.
async fn users(ctx: &Ctx, server: &str) -> Result<Vec<String>, TaskError> {
    let configs = ctx.ports.store.configs().await?.into_iter();
    Ok(configs.filter(|c| c.value.config.swarming == server).map(|c| c.value.config.prefix).collect())
}

#[cfg(test)]
mod tests;
