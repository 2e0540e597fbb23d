//! `manage_bot`: compares a created VM's bot with the VM record and acts on the difference.
//!
//! Bot state comes from the last `inspect_swarming` walk when fresh, else from GetBot.
//! * No bot yet: destroy the instance once the connection timeout or the deadline has passed
//!   (or, for a drained VM, once `bot_grace` has); else look again after `watch`.
//! * A bot that first connected long before this instance was created belongs to an earlier
//!   incarnation and is ignored (a static machine's bot was there before: it is ignored only
//!   once Swarming deleted it).
//! * Connected: record `connected` once. Destroy the instance when the bot was deleted, died after
//!   a TerminateBot (or reported `bot_terminate`), or has been dead longer than the timeout.
//!   Past the deadline, or drained: terminate the bot gracefully and watch; past the deadline
//!   while its Config is paused, a healthy VM is kept (it could not be replaced).
//! * Health: a dead bot makes it ask Compute about the instance; a stopped, preempted or gone
//!   instance is destroyed at once (its bot cannot come back), without waiting for the timeout.
//!   The fault (bot dead, instance down, never connected) is recorded on the VM, so status
//!   counts it at once, and on the Config's errors.
//! * Kept warm (parked): nothing but its lifetime and a drain matter; either destroys it at once.
//!   Just woken: a bot dead since before it slept is coming back, as a booting one is, for the
//!   timeout or `bot_grace` from the wake, whichever is longer (`Vm::coming_back`).

use chrono::{DateTime, Utc};

use crate::env::Ports;
use crate::work::{DestroyInstance, ManageBot, Next, TerminateBot};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{Bot, FaultKind, Observed, Vm};
use crate::ports::store::Versioned;
use crate::{fleet::lifecycle::fault, fleet::lifecycle::replace_down};
use crate::providers::Health;
use crate::{records::writes::update_vm, records::writes::write_vm_at};
use crate::metrics::Stage;


const STAGE: &str = "manage_bot";

/// The bot of `vm`, from a fresh observation or GetBot.
async fn bot_of(ctx: &Ctx, vm: &Vm, now: DateTime<Utc>) -> Result<Option<Bot>, TaskError> {
    let ttl = ctx.settings.timing.observation_ttl.chrono();
    let before = ctx.ports.store.bot(&vm.hostname).await?;
    if let Some(o) = &before
        && o.at + ttl > now
        && !o.bot.is_dead
    {
        return Ok(Some(o.bot.clone()));
    }
    let bot = ctx.ports.bots.get(&vm.swarming, &vm.hostname).await?;
    if let Some(b) = &bot {
        ctx.ports.store.put_bots(&[Observed::after(before.as_ref(), b.clone(), now)]).await?;
    }
    Ok(bot)
}

/// Whether the instance may go (LUCI's `isDestroyable`): the bot was deleted, died after a
/// TerminateBot, or has been dead longer than the timeout (at once when it is 0); also a dead bot
/// of a VM being retired (drained, past its deadline, asked to terminate), since it can no longer
/// run a termination task.
fn destroyable(bot: &Bot, vm: &Vm, now: DateTime<Utc>, paused: bool) -> bool {
    let dead_too_long = bot.last_seen.is_some_and(|t| t + crate::config::Secs(vm.timeout).chrono() < now);
    bot.deleted
        || (bot.is_dead && (!bot.termination_task_id.is_empty() || dead_too_long || vm.retiring(now, paused)))
}

/// Handles one task.
pub async fn run(ctx: &Ctx, t: ManageBot) -> Result<Next, TaskError> {
    let Ports { bots, .. } = &ctx.ports;
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = cur.value.clone();
    let (Some(destroy), Some(created)) = (DestroyInstance::of(&vm), vm.instance.as_ref().map(|i| i.created))
    else {
        return Ok(Next::Done);
    };
    let now = ctx.now();
    // Whether the VM is still wanted is decided elsewhere (expand_config, drain_vm): here it is
    // only read, as `drained`.
    let past = |secs: u64| secs > 0 && created + crate::config::Secs(secs).chrono() < now;
    if let Some(p) = &vm.parked {
        // Kept warm: its bot is silent on purpose. A warm VM still obeys its lifetime and goes
        // when drained: nothing runs on it, so its instance goes at once. Waking: `park_vm`
        // finishes the wake, then asks again.
        if p.waking.is_none() && (vm.drained || past(vm.lifetime)) {
            ctx.push(&destroy).await?;
        }
        return Ok(Next::Done);
    }
    let grace = ctx.settings.timing.bot_grace.chrono();
    let provider = ctx.providers.get(ctx, &vm.provider).await?;
    let lasting = provider.machines_outlive_vms();
    let ours = |b: &Bot| b.first_seen.is_none_or(|f| f + grace >= created) || (lasting && !b.deleted);
    let bot = bot_of(ctx, &vm, now).await?.filter(ours);
    let Some(bot) = bot else {
        if past(vm.timeout) || past(vm.lifetime) || (vm.drained && created + grace < now) {
            if past(vm.timeout) {
                let detail = format!("no bot connected within the timeout ({}s)", vm.timeout);
                fault(ctx, &vm, FaultKind::NeverConnected, &detail, STAGE).await?;
            }
            ctx.push(&destroy).await?;
            return Ok(Next::Done);
        }
        // Soon after boot, then backing off to `timing.watch`.
        return Ok(Next::After(ctx.look_again(now - created)));
    };
    if vm.connected.is_none()
        && let Some(first) = bot.first_seen
    {
        let written = write_vm_at(ctx, cur, |v| {
            v.hostname == vm.hostname && v.connected.is_none() && {
                v.connected = Some(first);
                true
            }
        })
        .await?;
        if let Some((Versioned { value: v, .. }, true)) = &written
            && let Some(placed) = &v.instance
        {
            ctx.metrics.lifecycle(v, Stage::CreatedToConnected, placed.created, first);
        }
        tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "bot connected");
        // A bot connected: earlier faults of this Config's VMs are behind it.
        ctx.resolved(&vm.config, &[STAGE, "inspect_instances"]).await?;
        crate::safety::breaker::connected(ctx, &vm).await?;
    }
    // Woken from the warm pool: its bot, dead while parked, comes back as a booting one does.
    if bot.is_dead
        && !bot.deleted
        && let Some(woken) = vm.woken.filter(|_| vm.coming_back(bot.last_seen, Some((now, grace))))
    {
        return Ok(Next::After(ctx.look_again(now - woken)));
    }
    // A dead bot, or one silent for long (Swarming takes minutes to call it dead): will it come
    // back? Not if its instance is stopped, preempted or gone.
    let silent = bot.silent(now, ctx.silent_after());
    if (bot.is_dead || silent) && !bot.deleted && vm.destroying.is_none() {
        match provider.check(ctx, &vm).await? {
            Health::Up(_) => {
                if bot.is_dead {
                    let since = bot.last_seen.map_or_else(|| "unknown".to_owned(), |t| t.to_rfc3339());
                    fault(ctx, &vm, FaultKind::BotDead, &format!("bot dead (last seen {since})"), STAGE)
                        .await?;
                }
            }
            Health::Down(status) => {
                return replace_down(ctx, &vm, Some(&status), STAGE).await.map(|()| Next::Done);
            }
            Health::Gone => return replace_down(ctx, &vm, None, STAGE).await.map(|()| Next::Done),
        }
    } else if vm.fault.as_ref().is_some_and(|f| f.kind == FaultKind::BotDead) {
        update_vm(ctx, &vm.id, |v| {
            v.hostname == vm.hostname && v.fault.as_ref().is_some_and(|f| f.kind == FaultKind::BotDead) && {
                v.fault = None;
                true
            }
        })
        .await?;
        tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "bot alive again");
        ctx.resolved(&vm.config, &[STAGE]).await?;
    }
    // The pause matters only to a VM that would be retired (a dead bot, or past the deadline).
    let paused = (bot.is_dead || past(vm.lifetime)) && crate::safety::pause::held_of(ctx, &vm.config).await?.is_some();
    if destroyable(&bot, &vm, now, paused) {
        ctx.push(&destroy).await?;
        return Ok(Next::Done);
    }
    if bot.is_dead && !bot.deleted {
        // Dead, not for long enough yet: look again once the timeout has passed (nothing else
        // would bring this VM back: its observation no longer changes).
        let until = bot.last_seen.map(|t| t + crate::config::Secs(vm.timeout.saturating_add(1)).chrono() - now);
        return Ok(Next::After(until.and_then(|d| d.to_std().ok()).unwrap_or_else(|| ctx.watch())));
    }
    if vm.terminate_sent.is_some() {
        let events = bots.events(&vm.swarming, &vm.hostname, created).await?;
        if events.iter().any(|e| e.event_type == "bot_terminate") {
            ctx.push(&destroy).await?;
        } else {
            // The termination may have been lost (expired, cancelled, bot restarted):
            // `terminate_bot` sends it again once `terminate_again_after` has passed.
            ctx.push(&TerminateBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await?;
            return Ok(Next::After(ctx.watch()));
        }
        return Ok(Next::Done);
    }
    if vm.drained || (past(vm.lifetime) && !paused) {
        ctx.push(&TerminateBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await?;
        return Ok(Next::After(ctx.watch()));
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
