//! `expand_config`: brings a Config's amount up to date and makes its missing VM records
//! (`making.rs`, a few at a time, each then handed on to what sends it), in bounded batches: at
//! most `limits.expand_batch` per run, and only while fewer than
//! `limits.creating_per_config` of its VMs wait for an instance; a multi-zone Config's batch is
//! placed in its zones at once (`zones::places`). It then looks again a second
//! later, re-reading the Config, so a lowered amount or a restored file stops creation at once.
//! It pushes `drain_vm` for VMs past the amount at once; the draining itself is `drain_vm`'s.
//! While the Config is paused ([`Ctx::paused`]) it creates nothing (it still drains). While its
//! provider changes, it drains the old provider's VMs a few at a time ([`switch_step`]);
//! while a rolling update goes on, the VMs of older attributes (`rollout::step`).

use std::collections::BTreeSet;
use std::time::Duration;


use crate::env::Ports;
use crate::work::{DrainVm, ExpandConfig, Next, ParkVm, PoolResources};
use crate::ctx::Ctx;
use crate::model::ConfigRecord;
use crate::error::TaskError;
use crate::ports::store::{Expect, VmIndex};


/// Pause between two batches.
const BATCH_PAUSE: Duration = Duration::from_secs(1);

/// Gives the measurements of Config `rec` (lifecycle and lifetime) and of its project
/// (rate-limit holds per class) series at zero, so they read 0 rather than nothing before
/// anything happens; idempotent, and done here as every Config is handled at least once a minute.
fn declare_series(ctx: &Ctx, rec: &ConfigRecord) {
    ctx.metrics.declare_config(&rec.config.prefix);
    let project = rec.config.attributes.project.as_str();
    if !project.is_empty() {
        ctx.metrics.declare_project(project, &crate::ports::rated::Class::ALL.map(|c| c.name()));
    }
}

/// Handles one task.
pub async fn run(ctx: &Ctx, t: ExpandConfig) -> Result<Next, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    let Some(cur) = store.config(&t.prefix).await? else { return Ok(Next::Done) };
    let mut rec = cur.value;
    declare_series(ctx, &rec);
    let amount = rec.amount_at(ctx.now());
    // Sorted: the steps below drain in this order.
    let existing: BTreeSet<String> =
        store.vm_ids(VmIndex::OfConfig(t.prefix.clone())).await?.into_iter().collect();
    let ids: Vec<String> = existing.iter().cloned().collect();
    let before = (rec.current_amount, rec.let_go.clone(), rec.warm.clone(), rec.waking.clone());
    rec.current_amount = amount;
    arrange(ctx, &mut rec, &ids).await?;
    // Woken indexes no longer wanted, or whose VM is gone, are not asked for again.
    let keep: BTreeSet<u32> = rec
        .waking
        .iter()
        .copied()
        .filter(|i| rec.wants(*i) && existing.contains(&crate::naming::vm_id(&t.prefix, *i)))
        .collect();
    rec.waking = keep;
    let after = (rec.current_amount, rec.let_go.clone(), rec.warm.clone(), rec.waking.clone());
    if after != before && !store.put_config(&rec, Expect::Version(cur.version)).await? {
        return Err(TaskError::Conflict(t.prefix));
    }
    // Woken from the warm pool: asked again on every look until awake (`park_vm` clears it),
    // unless paused (resuming pushes this task again).
    if !rec.waking.is_empty() && crate::safety::pause::paused(ctx, Some(&rec)).await?.is_none() {
        let waking: Vec<ParkVm> =
            rec.waking.iter().map(|i| ParkVm { id: crate::naming::vm_id(&t.prefix, *i) }).collect();
        ctx.push_many(&waking).await?;
    }
    // A new or changed Config: its provider's per-pool resources (an instance template) are made.
    if rec.needs_resources() {
        ctx.push(&PoolResources { prefix: t.prefix.clone() }).await?;
    }
    // A Spot failover whose cooldown has passed is over: new VMs are Spot again.
    crate::placement::spot::settle(ctx, &rec).await?;
    // Shrinking: the surplus is drained at once rather than at the next drain_vms tick.
    let surplus: Vec<DrainVm> = ids
        .iter()
        .filter(|id| crate::naming::parse_id(id).is_none_or(|(_, i)| !rec.makes(i)))
        .map(|id| DrainVm { id: id.clone() })
        .collect();
    ctx.push_many(&surplus).await?;
    // A change of provider: the old provider's VMs go a few at a time (each deletion pushes
    // this task again; meanwhile, look again).
    let switching = match rec.provider_changed {
        Some(_) => switch_step(ctx, &t.prefix, &ids).await?,
        None => false,
    };
    // A rolling update: VMs of older attributes go while enough bots stay connected.
    // (Its last step clears the mark: the next look drains the surge.)
    let rolling = match rec.rollout {
        Some(_) => {
            if !crate::fleet::rollout::step(ctx, &t.prefix, &ids).await? {
                // Done (or nothing to replace): no surge is made for it.
                rec.rollout = None;
            }
            true
        }
        None => false,
    };
    let done = if switching || rolling { Next::After(ctx.watch()) } else { Next::Done };
    // Wanted first, then the warm pool's VMs not made yet.
    let missing: Vec<String> = rec
        .wanted()
        .into_iter()
        .chain(rec.warm.iter().copied())
        .map(|i| crate::naming::vm_id(&t.prefix, i))
        .filter(|id| !existing.contains(id))
        .collect();
    if missing.is_empty() {
        return Ok(done);
    }
    if rec.breaker.open.is_some() && crate::safety::pause::paused(ctx, Some(&rec)).await?.is_none() {
        return crate::safety::breaker::expand(ctx, &rec, &missing).await; // a canary at a time
    }
    if let Some(p) = crate::safety::pause::paused(ctx, Some(&rec)).await? {
        tracing::debug!(config = %t.prefix, missing = missing.len(), paused_by = %p.by, "paused: nothing is created");
        return Ok(done); // resuming pushes this task again
    }
    // VMs of the Config without an instance: its records less its created ones (O(1) sums).
    let sums = crate::records::counts::sums(&**store, &t.prefix).await?;
    let creating = (sums[0] - sums[1]).max(0) as usize;
    let limits = &ctx.settings.limits;
    let room =
        (limits.creating_per_config as usize).saturating_sub(creating).min(limits.expand_batch as usize);
    let room = room.min(budget_room(ctx, &rec, missing.len()).await?);
    let batch = &missing[..room.min(missing.len())];
    crate::making::make_all(ctx, &rec, batch).await?;
    if missing.len() > batch.len() {
        tracing::debug!(config = %t.prefix, made = batch.len(), left = missing.len() - batch.len(), "expanding in batches");
        // Room frees as instances are made; with none (quota, stockout), look again later.
        return Ok(Next::After(if batch.is_empty() { ctx.watch() } else { BATCH_PAUSE }));
    }
    Ok(done)
}

/// How many of the `lacking` VMs Config `rec`'s tenant's budget lets it make now (all of them
/// without a limit). A hold is said once on its status (stage `budget`; `status` shows the
/// numbers) and marked resolved once growth is free again.
async fn budget_room(ctx: &Ctx, rec: &ConfigRecord, lacking: usize) -> Result<usize, TaskError> {
    let now = ctx.now();
    let rates = ctx.catalog.rates(ctx.ports.store.as_ref(), now).await?;
    let Some(h) = crate::spend::hold(&*ctx.ports.store, &ctx.settings.trust, &rates, rec, now).await? else { return Ok(lacking) };
    let room = usize::try_from(h.room).unwrap_or(usize::MAX).min(lacking);
    let prefix = &rec.config.prefix;
    if room < lacking {
        tracing::debug!(config = %prefix, lacking, room, "{}", h.said());
        // Said in words that stay the same while it holds; status has the numbers.
        let by = h.limit.by.split(' ').next().unwrap_or_default();
        let said = format!("growth held by tenant {}'s budget ({by}): see status for the numbers", h.tenant);
        ctx.record_once(prefix, "budget", "held", &said).await?;
    } else {
        ctx.resolved(prefix, &["budget"]).await?;
    }
    Ok(room)
}

/// Idle first: when a VM of Config `rec` would go (not wanted, not kept warm, not yet drained),
/// or it `grew` while an index is let go or kept warm (`release::must_arrange`), the VMs it keeps are chosen again from
/// how they stand (`release::arrange`: no instance, down, longest idle, booting, busy last),
/// parked VMs woken before new ones are made, and idle VMs let go kept warm up to its warm pool;
/// so a shrinking pool loses the VMs whose loss costs least and never cuts a task short. It sets
/// `rec.let_go`, `rec.warm` and `rec.waking`, and asks `park_vm` to park the VMs newly kept warm.
/// Reads the Config's VM records only then (`ids`: its VM ids).
async fn arrange(ctx: &Ctx, rec: &mut ConfigRecord, ids: &[String]) -> Result<(), TaskError> {
    let index = |id: &String| crate::naming::parse_id(id).map(|(_, i)| i);
    let mut surplus = false;
    for id in ids.iter().filter(|id| index(id).is_some_and(|i| !rec.makes(i))) {
        surplus |= crate::records::writes::readable_vm(ctx, id).await?.is_some_and(|v| !v.drained);
        if surplus {
            break;
        }
    }
    let present: BTreeSet<u32> = ids.iter().filter_map(index).collect();
    if !crate::model::release::must_arrange(rec, surplus, &present, ctx.now()) {
        return Ok(());
    }
    let (vms, seen) = crate::records::writes::vms_and_bots(ctx, ids).await?;
    let a = crate::model::release::of_records(rec, &vms, &seen, ctx.now());
    // Kept warm and not parked yet; a VM not made yet is followed by `park_vm` once `create_vm`
    // has made its record.
    let unparked: BTreeSet<u32> = vms.iter().filter(|v| v.parked.is_none()).map(|v| v.index).collect();
    let newly: Vec<ParkVm> = a
        .warm
        .iter()
        .filter(|i| unparked.contains(i))
        .map(|i| ParkVm { id: crate::naming::vm_id(&rec.config.prefix, *i) })
        .collect();
    rec.let_go = a.let_go;
    rec.warm = a.warm;
    rec.waking.extend(a.wake);
    ctx.push_many(&newly).await?;
    Ok(())
}

/// One step of a provider change of Config `prefix` (marked `provider_changed`): its VMs of
/// another provider are drained a few at a time (at most a tenth of the amount, at least one,
/// drained at once; each id is made again by the new provider once its old VM is gone), and the
/// mark is cleared when none is left. `ids`: the Config's VM ids, as the caller read them.
/// Returns whether the change is still going on (the caller looks again). Called only while the
/// Config is marked; reads every VM record of the Config.
async fn switch_step(ctx: &Ctx, prefix: &str, ids: &[String]) -> Result<bool, TaskError> {
    let Some(cur) = ctx.ports.store.config(prefix).await? else { return Ok(false) };
    let Some(since) = cur.value.provider_changed else { return Ok(false) };
    let to = ctx.providers.declared().resolve(&cur.value.config.provider).to_owned();
    let (mut waiting, mut in_flight) = (Vec::new(), 0usize);
    for id in ids {
        match ctx.ports.store.vm(id).await? {
            Some(v) if ctx.providers.declared().resolve(&v.value.provider) != to.as_str() => match v.value.drained {
                true => in_flight += 1,
                false => waiting.push(crate::work::DrainVm { id: id.clone() }),
            },
            _ => {}
        }
    }
    if waiting.is_empty() && in_flight == 0 {
        let rec = ConfigRecord { provider_changed: None, ..cur.value };
        let done = ctx.ports.store.put_config(&rec, crate::ports::store::Expect::Version(cur.version)).await?;
        if done {
            let secs = (ctx.now() - since).num_seconds();
            tracing::info!(config = %prefix, provider = %to, seconds = secs, "provider change done: every VM comes from the new provider");
        }
        return Ok(!done);
    }
    let budget = crate::model::rollout_mark::switch_batch(cur.value.current_amount) as usize;
    // In index order, as a plan lists them.
    waiting.sort_by_key(|d| crate::naming::parse_id(&d.id).map(|(_, i)| i));
    waiting.truncate(budget.saturating_sub(in_flight));
    if !waiting.is_empty() {
        tracing::info!(config = %prefix, provider = %to, draining = waiting.len(), in_flight, "provider change: draining VMs of the old provider");
    }
    ctx.push_many(&waiting).await?;
    Ok(true)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod budget_tests;
