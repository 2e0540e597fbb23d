//! `expand_config`: brings a Config's amount up to date and pushes `create_vm` for missing VM
//! ids, in bounded batches: at most `limits.expand_batch` per run, and only while fewer than
//! `limits.creating_per_config` of its VMs wait for an instance; a multi-zone Config's batch is
//! placed in its zones at once (`zones::place_batch`). It then looks again a second
//! later, re-reading the Config, so a lowered amount or a restored file stops creation at once.
//! It pushes `drain_vm` for VMs past the amount at once; the draining itself is `drain_vm`'s.
//! While the Config is paused ([`Ctx::paused`]) it creates nothing (it still drains). While its
//! provider changes, it drains the old provider's VMs a few at a time (`providers::switch_step`);
//! while a rolling update goes on, the VMs of older attributes (`rollout::step`).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::tasks::{CreateVm, DrainVm};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::ports::store::{Expect, VmIndex};
use crate::tasks::Next;

task!(
    /// Create the missing VMs of a Config.
    ExpandConfig, "expand_config", { /// Config prefix.
    prefix }, |self| self.prefix.clone()
);

/// Pause between two batches.
const BATCH_PAUSE: Duration = Duration::from_secs(1);

/// Handles one task.
pub async fn run(ctx: &Ctx, t: ExpandConfig) -> Result<Next, TaskError> {
    let Some(cur) = ctx.store.config(&t.prefix).await? else { return Ok(Next::Done) };
    let mut rec = cur.value;
    let amount = rec.amount_at(ctx.now());
    if amount != rec.current_amount {
        rec.current_amount = amount;
        if !ctx.store.put_config(&rec, Expect::Version(cur.version)).await? {
            return Err(TaskError::Conflict(t.prefix));
        }
    }
    // Sorted: the steps below drain in this order.
    let existing: BTreeSet<String> =
        ctx.store.vm_ids(VmIndex::OfConfig(t.prefix.clone())).await?.into_iter().collect();
    let ids: Vec<String> = existing.iter().cloned().collect();
    // Shrinking: the surplus is drained at once rather than at the next drain_vms tick.
    let surplus: Vec<DrainVm> = ids
        .iter()
        .filter(|id| crate::naming::parse_id(id).is_none_or(|(_, i)| !rec.wants(i)))
        .map(|id| DrainVm { id: id.clone() })
        .collect();
    ctx.push_many(&surplus).await?;
    // A change of provider: the old provider's VMs go a few at a time (each deletion pushes
    // this task again; meanwhile, look again).
    let switching = match rec.provider_changed {
        Some(_) => crate::providers::switch_step(ctx, &t.prefix, &ids).await?,
        None => false,
    };
    // A rolling update: VMs of older attributes go while enough bots stay connected.
    // (Its last step clears the mark: the next look drains the surge.)
    let rolling = match rec.rollout {
        Some(_) => {
            crate::rollout::step(ctx, &t.prefix, &ids).await?;
            true
        }
        None => false,
    };
    let done = if switching || rolling { Next::After(ctx.watch()) } else { Next::Done };
    let missing: Vec<String> = rec
        .wanted()
        .into_iter()
        .map(|i| crate::naming::vm_id(&t.prefix, i))
        .filter(|id| !existing.contains(id))
        .collect();
    if missing.is_empty() {
        return Ok(done);
    }
    if rec.breaker.open.is_some() && ctx.paused(&rec).await?.is_none() {
        return crate::breaker::expand(ctx, &rec, &missing).await; // a canary at a time
    }
    if let Some(p) = ctx.paused(&rec).await? {
        tracing::debug!(config = %t.prefix, missing = missing.len(), paused_by = %p.by, "paused: nothing is created");
        return Ok(done); // resuming pushes this task again
    }
    // VMs of the Config without an instance: its records less its created ones (O(1) sums).
    let sums = crate::status::sums(&*ctx.store, &t.prefix).await?;
    let creating = (sums[0] - sums[1]).max(0) as usize;
    let limits = &ctx.limits;
    let room =
        (limits.creating_per_config as usize).saturating_sub(creating).min(limits.expand_batch as usize);
    let batch: Vec<CreateVm> = missing.iter().take(room).map(|id| CreateVm { id: id.clone() }).collect();
    crate::zones::place_batch(ctx, &rec, &missing[..batch.len()]).await?;
    ctx.push_many(&batch).await?;
    if missing.len() > batch.len() {
        tracing::debug!(config = %t.prefix, pushed = batch.len(), left = missing.len() - batch.len(), "expanding in batches");
        // Room frees as instances are made; with none (quota, stockout), look again later.
        return Ok(Next::After(if batch.is_empty() { ctx.watch() } else { BATCH_PAUSE }));
    }
    Ok(done)
}

#[cfg(test)]
mod tests;
