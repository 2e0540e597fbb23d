//! `manage_bot`: compares a created VM's bot with the VM record and acts on the difference.
//!
//! Bot state comes from the last `inspect_swarming` walk when fresh, else from GetBot.
//! * No bot yet: destroy the instance once the connection timeout or the deadline has passed
//!   (or, for a drained VM, once `bot_grace` has); else look again after `watch`.
//! * A bot that first connected long before this instance was created belongs to an earlier
//!   incarnation and is ignored.
//! * Connected: record `connected` once. Destroy the instance when the bot was deleted, died after
//!   a TerminateBot (or reported `bot_terminate`), or has been dead longer than the timeout.
//!   Past the deadline, or drained: terminate the bot gracefully and watch.

use std::time::Duration;

use chrono::{DateTime, Utc};
use gce_backend_queues::payload::{DestroyInstance, DrainVm, ManageBot, TerminateBot};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{Bot, Observed, Vm};
use crate::tasks::update_vm;

/// The bot of `vm`, from a fresh observation or GetBot.
async fn bot_of(ctx: &Ctx, vm: &Vm, now: DateTime<Utc>) -> Result<Option<Bot>, TaskError> {
    let ttl = ctx.timing.observation_ttl.chrono();
    if let Some(o) = ctx.store.bot(&vm.hostname).await?
        && o.at + ttl > now
        && !o.bot.is_dead
    {
        return Ok(Some(o.bot));
    }
    let bot = ctx.bots.get(&vm.swarming, &vm.hostname).await?;
    if let Some(b) = &bot {
        ctx.store.put_bots(&[Observed { bot: b.clone(), at: now }]).await?;
    }
    Ok(bot)
}

/// Whether the instance may go (LUCI's `isDestroyable`).
fn destroyable(bot: &Bot, vm: &Vm, now: DateTime<Utc>) -> bool {
    let dead_too_long = vm.timeout > 0
        && bot.last_seen.is_some_and(|t| t + chrono::Duration::seconds(vm.timeout as i64) < now);
    bot.deleted || (bot.is_dead && (!bot.termination_task_id.is_empty() || dead_too_long))
}

/// Handles one task.
pub async fn run(ctx: &Ctx, t: ManageBot) -> Result<(), TaskError> {
    let Some(cur) = ctx.store.vm(&t.id).await? else { return Ok(()) };
    let vm = cur.value;
    let Some(created) = vm.created.filter(|_| !vm.url.is_empty()) else { return Ok(()) };
    let now = ctx.now();
    if !vm.drained {
        let amount = ctx.store.config(&vm.config).await?.map(|c| c.value.current_amount);
        if amount.is_none_or(|a| vm.index >= a) {
            ctx.push(&DrainVm { id: vm.id.clone() }).await?;
        }
    }
    let destroy = DestroyInstance { id: vm.id.clone(), url: vm.url.clone() };
    let past = |secs: u64| secs > 0 && created + chrono::Duration::seconds(secs as i64) < now;
    let grace = ctx.timing.bot_grace.chrono();
    let bot = bot_of(ctx, &vm, now).await?.filter(|b| b.first_seen.is_none_or(|f| f + grace >= created));
    let Some(bot) = bot else {
        if past(vm.timeout) || past(vm.lifetime) || (vm.drained && created + grace < now) {
            ctx.push(&destroy).await?;
        } else {
            ctx.again(&t, ctx.watch()).await?;
        }
        return Ok(());
    };
    if vm.connected.is_none()
        && let Some(first) = bot.first_seen
    {
        update_vm(ctx, &vm.id, |v| {
            v.hostname == vm.hostname && v.connected.is_none() && {
                v.connected = Some(first);
                true
            }
        })
        .await?;
    }
    if destroyable(&bot, &vm, now) {
        ctx.push(&destroy).await?;
        return Ok(());
    }
    if vm.terminate_sent.is_some() {
        let events = ctx.bots.events(&vm.swarming, &vm.hostname, created).await?;
        if events.iter().any(|e| e.event_type == "bot_terminate") {
            ctx.push(&destroy).await?;
        } else {
            ctx.again(&t, ctx.watch()).await?;
        }
        return Ok(());
    }
    if vm.drained || past(vm.lifetime) {
        ctx.push(&TerminateBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await?;
        ctx.again(&t, ctx.watch()).await?;
    } else if vm.connected.is_none() {
        // Just connected: count it at once, then leave it to the cron.
        ctx.again(&t, Duration::from_secs(1)).await?;
    }
    Ok(())
}
