//! `bulk_insert`: sends a Config's VMs waiting for their first instance to Compute Engine
//! together, and follows the bulks it sent (`providers/gce_bulk.rs`).
//!
//! * While the Config's records are still being made and fewer than a full bulk wait, it waits
//!   for more, up to `[timing] bulk_gather` (unless bulks of the Config are in flight: those are
//!   followed meanwhile, and nothing new is sent while gathering).
//! * Its VMs in a bulk (sent, or claimed for one) are followed until their instances are recorded.
//! * Its VMs waiting for a first insert, of a Compute Engine provider, that may be sent (the one
//!   rule, `lifecycle::sendable`: one no longer made is dropped) are sent, in bulk by (zone,
//!   attributes) or alone when few.
//! * A VM sent alone, or retried after a failed insert, is `create_instance`'s: once nothing of
//!   the Config is in flight here, such VMs are handed on to it (pushed; one with its task
//!   waiting keeps it), so the `create_instances` cron, which pushes this task for a Config in
//!   bulk, loses none of them.

use std::collections::BTreeMap;

use crate::config::providers::Kind;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::lifecycle::sendable;
use crate::model::Vm;
use crate::model::marks::BULKS_OPEN;
use crate::ports::store::{StoreError, Versioned, VmIndex};
use crate::providers::gce_bulk;
use crate::work::{BulkInsert, CreateInstance, Next};
use crate::writes::each;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: BulkInsert) -> Result<Next, TaskError> {
    let cfg = ctx.store.config(&t.prefix).await?.map(|c| c.value);
    let gather = match &cfg {
        Some(c) => gce_bulk::gathering(ctx, c).await?,
        None => None,
    };
    // Bulks in flight are followed while more VMs are gathered.
    let open_known = ctx.store.marked(BULKS_OPEN, &t.prefix).await?.is_some();
    if let Some(wait) = gather.filter(|_| !open_known) {
        return Ok(Next::After(wait.min(gce_bulk::GATHER_LOOK)));
    }
    // Nothing in flight and no place for a bulk in the project: its VMs are not read for nothing.
    if let Some(c) = cfg.as_ref().filter(|_| !open_known)
        && !gce_bulk::place_free(ctx, &c.config.attributes.project).await
    {
        return Ok(Next::After(gce_bulk::PLACE_WAIT));
    }
    let providers = ctx.providers.declared();
    let paused = crate::pause::paused(ctx, cfg.as_ref()).await?;
    let (mut open, mut waiting) = (BTreeMap::<String, Vec<Versioned<Vm>>>::new(), Vec::new());
    let mut others = Vec::new();
    for cur in vms_of(ctx, &t.prefix).await? {
        let vm = &cur.value;
        if vm.instance.is_some() {
            continue;
        }
        if !vm.batch.is_empty() {
            open.entry(vm.batch.clone()).or_default().push(cur);
            continue;
        }
        let gce = providers.kind(providers.resolve(&vm.provider)) == Some(Kind::Gce);
        if vm.insert_sent.is_some() || vm.insert_attempt > 0 || !gce {
            others.push(CreateInstance { id: vm.id.clone() });
            continue;
        }
        if gather.is_some() {
            continue;
        }
        if sendable(ctx, providers, cfg.as_ref(), paused.as_ref(), vm).await? {
            waiting.push(cur);
        }
    }
    if open.is_empty() && open_known {
        ctx.store.unmark(BULKS_OPEN, &t.prefix).await?;
    }
    let next = gce_bulk::step(ctx, open.into_values().collect(), waiting).await?;
    // Nothing of its own left to follow: the VMs sent alone (or on a later attempt) are
    // create_instance's, handed on (a task already waiting for one stays as it is).
    if next == Next::Done && gather.is_none() {
        ctx.push_many(&others).await?;
    }
    // Gathering: looked at again when its bulks in flight are due, or soon when none is.
    Ok(match (gather, next) {
        (None, next) => next,
        (Some(wait), Next::Done) => Next::After(wait.min(gce_bulk::GATHER_LOOK)),
        (Some(wait), Next::After(due)) => Next::After(wait.min(due)),
    })
}

/// The VM records of Config `prefix` without an instance (read a few at a time; one gone or not
/// decoding is left out: it is repaired elsewhere).
async fn vms_of(ctx: &Ctx, prefix: &str) -> Result<Vec<Versioned<Vm>>, TaskError> {
    let ids = ctx.store.vm_ids(VmIndex::UncreatedOf(prefix.to_owned())).await?;
    let all = each(ids, |id| async move {
        match ctx.store.vm(&id).await {
            Ok(vm) => Ok(vm),
            Err(StoreError::Corrupt { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    Ok(all.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests;
