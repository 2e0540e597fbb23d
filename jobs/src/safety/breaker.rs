//! A Config's circuit breaker, in one place. A VM *fails* when its bot never connects, or dies
//! (or its instance goes down, a preemption aside) within `breaker.within` of connecting; a bot
//! that connected after a streak began and has lived that long ends the streak (looked for only
//! when a failure would open the breaker, so it costs nothing while VMs are healthy). After
//! `breaker.after` failures in a row the breaker
//! opens: no VM of the Config is created or replaced (the others keep working, past their
//! deadline too; deletions go on), the Config's status says why, and one canary VM at a time is
//! made, the first `canary_after` later, each next one twice as late (at most an hour). The
//! breaker closes when a canary's bot connects, and the Config converges again.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::env::Env;
use crate::error::TaskError;
use crate::model::{ConfigRecord, FaultKind, Vm};
use crate::work::{CreateVm, Next};
use crate::{model::breaker_state::BY, model::breaker_state::Open};

/// Longest wait between canaries.
const CANARY_CAP: Duration = Duration::from_secs(3600);

/// Changes Config `prefix`'s record with `change` (false: leave it); the record, if written.
async fn update(
    ctx: &Env,
    prefix: &str,
    change: impl Fn(&mut ConfigRecord) -> bool,
) -> Result<Option<ConfigRecord>, TaskError> {
    let found =
        crate::records::writes::update_config(ctx, prefix, |rec| Ok::<_, TaskError>(change(rec))).await?;
    Ok(found.filter(|(_, wrote)| *wrote).map(|(rec, _)| rec))
}

/// The wait before canary number `n + 1` (`n` failed).
fn canary_wait(base: Duration, n: u32) -> chrono::Duration {
    let d = base.saturating_mul(1 << n.min(16)).min(CANARY_CAP);
    chrono::Duration::from_std(d).unwrap_or_default()
}

/// `vm` got a fault of `kind`: counted when it is a failure (never connected; dead or down soon
/// after connecting, a preemption aside). May open the breaker, or put the next canary off.
pub async fn failed(ctx: &Env, vm: &Vm, kind: FaultKind) -> Result<(), TaskError> {
    let now = ctx.now();
    let Some(cfg) = ctx.ports.store.config(&vm.config).await? else { return Ok(()) };
    let b = &cfg.value.config.breaker;
    let soon = vm.connected.is_some_and(|c| now - c < b.within.chrono());
    let counts = match kind {
        FaultKind::NeverConnected => true,
        FaultKind::BotDead => soon,
        FaultKind::InstanceDown => soon && !vm.attributes.preemptible(),
    };
    if b.after == 0 || !counts {
        return Ok(());
    }
    let (after, base) = (b.after, Duration::from_secs(b.canary_after.0));
    let what = match kind {
        FaultKind::NeverConnected => "never connected",
        _ => "died soon after connecting",
    };
    // About to open: did a bot prove itself since the streak began? Then it is a new streak.
    let st = &cfg.value.breaker;
    let proven = st.open.is_none()
        && st.failed_in_a_row + 1 >= after
        && proven_since(ctx, &vm.config, st.since, now - b.within.chrono()).await?;
    let written = update(ctx, &vm.config, |rec| {
        if proven {
            rec.breaker.failed_in_a_row = 0;
        }
        if rec.breaker.failed_in_a_row == 0 {
            rec.breaker.since = Some(now);
        }
        rec.breaker.failed_in_a_row = rec.breaker.failed_in_a_row.saturating_add(1);
        let n = rec.breaker.failed_in_a_row;
        match &mut rec.breaker.open {
            Some(open) if open.canary.as_deref() == Some(vm.id.as_str()) => {
                open.canary = None;
                open.canaries += 1;
                open.next_canary = now + canary_wait(base, open.canaries);
            }
            Some(_) => {}
            None if n >= after => {
                rec.breaker.open = Some(Open {
                    unknown: Default::default(),
                    since: now,
                    reason: format!("{n} VMs in a row failed; the last, {}, {what}", vm.hostname),
                    canaries: 0,
                    next_canary: now + canary_wait(base, 0),
                    canary: None,
                });
            }
            None => {}
        }
        true
    })
    .await?;
    let Some(rec) = written else { return Ok(()) };
    match &rec.breaker.open {
        Some(open) if open.since == now => {
            tracing::error!(config = %vm.config, reason = %open.reason, "breaker open: no VM is replaced but one canary at a time");
            let msg = format!(
                "breaker open: {}; a canary follows at {}",
                open.reason,
                open.next_canary.to_rfc3339()
            );
            ctx.record_vm(vm, BY, "open", &msg, "").await?;
        }
        Some(open) if vm.canary => {
            tracing::warn!(config = %vm.config, vm = %vm.id, next = %open.next_canary, "canary failed: the breaker stays open");
        }
        _ => {}
    }
    Ok(())
}

/// `vm`'s bot connected: a canary's closes its Config's breaker.
pub async fn connected(ctx: &Env, vm: &Vm) -> Result<(), TaskError> {
    if !vm.canary {
        return Ok(());
    }
    let closed = update(ctx, &vm.config, |rec| {
        rec.breaker.open.take().is_some() && {
            rec.breaker.failed_in_a_row = 0;
            rec.breaker.since = None;
            true
        }
    })
    .await?;
    if closed.is_some() {
        tracing::info!(config = %vm.config, vm = %vm.id, "breaker closed: a canary connected");
        ctx.resolved(&vm.config, &[BY]).await?;
        crate::safety::pause::wake(ctx, Some(&vm.config)).await?;
    }
    Ok(())
}

/// Whether a VM of Config `prefix` connected at or after `since` and by `lived` (so it has lived
/// `within`), and is still healthy. Reads the Config's VMs.
async fn proven_since(
    ctx: &Env,
    prefix: &str,
    since: Option<DateTime<Utc>>,
    lived: DateTime<Utc>,
) -> Result<bool, TaskError> {
    let Some(since) = since else { return Ok(false) };
    for id in ctx.ports.store.vm_ids(crate::ports::store::VmIndex::OfConfig(prefix.to_owned())).await? {
        if let Some(v) = ctx.ports.store.vm(&id).await?
            && v.value.serving()
            && v.value.connected.is_some_and(|c| c >= since && c <= lived)
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `expand_config` while the breaker of `rec` is open: makes the canary when it is due (the first
/// of `missing`), and says when to look again.
pub async fn expand(ctx: &Env, rec: &ConfigRecord, missing: &[String]) -> Result<Next, TaskError> {
    let Some(open) = &rec.breaker.open else { return Ok(Next::Done) };
    let now = ctx.now();
    if let Some(id) = &open.canary {
        // Its success or failure moves the breaker on; a canary whose record went without a
        // fault (dropped before its instance) is made again.
        if missing.contains(id) {
            ctx.push(&CreateVm { id: id.clone() }).await?;
        }
        return Ok(Next::Done);
    }
    if missing.is_empty() {
        return Ok(Next::Done);
    }
    if now < open.next_canary {
        return Ok(Next::After((open.next_canary - now).to_std().unwrap_or_default()));
    }
    let id = missing[0].clone();
    let prefix = &rec.config.prefix;
    let chosen = update(ctx, prefix, |r| {
        r.breaker.open.as_mut().is_some_and(|o| {
            o.canary.is_none() && {
                o.canary = Some(id.clone());
                true
            }
        })
    })
    .await?;
    if chosen.is_some() {
        tracing::info!(config = %prefix, vm = %id, "breaker open: trying a canary");
        ctx.push(&CreateVm { id }).await?;
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
