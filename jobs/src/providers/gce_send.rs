//! How the Compute Engine provider sends a Config's new VMs: the one choice between one by one
//! and together ([`batch`]), and each step of the Config's `bulk_insert` ([`step`]), which sends
//! what was put together in bulks (`gce_bulk.rs`) and follows the bulks it sent.
//!
//! * Together while the Config makes `bulk_min` VMs or more and more are on their way
//!   (`gce_bulk::in_bulk`); else one by one, each by its `create_instance`.
//! * While the Config's records are still being made and fewer than a full bulk wait, `step`
//!   waits for more, up to `[timing] bulk_gather` (unless bulks of the Config are in flight:
//!   those are followed meanwhile, and nothing new is sent while gathering).
//! * Its VMs in a bulk (sent, or claimed for one) are followed until their instances are recorded.
//! * Its VMs waiting for a first insert, of the Config's provider, that may be sent (the one
//!   rule, `lifecycle::sendable`: one no longer made is dropped) are sent, in bulk by (zone,
//!   attributes) or alone when few.
//! * A VM sent alone, retried after a failed insert, or of another provider is
//!   `create_instance`'s: once nothing of the Config is in flight here, such VMs are handed on
//!   to it (pushed; one with its task waiting keeps it), so the `create_instances` cron, which
//!   pushes `bulk_insert` for a Config in bulk, loses none of them.
//! * Without its Config (gone, or now of another provider) only the bulks in flight are followed.

use std::collections::BTreeMap;

use super::contract::Batch;
use super::gce_bulk;
use crate::config::providers::ProviderIds;
use crate::env::Env;
use crate::error::TaskError;
use crate::fleet::lifecycle::sendable;
use crate::model::marks::BULKS_OPEN;
use crate::model::{ConfigRecord, Vm};
use crate::ports::store::{StoreError, Versioned, VmIndex};
use crate::records::writes::each;
use crate::work::{BulkInsert, CreateInstance, Next};

/// How VMs `ids` of Config `rec` waiting for their first insert are sent: together by the
/// Config's `bulk_insert` while `gce_bulk::in_bulk` says so, else one by one.
pub(super) async fn batch(ctx: &Env, rec: &ConfigRecord, ids: &[String]) -> Result<Batch, TaskError> {
    Ok(match gce_bulk::in_bulk(ctx, rec).await? {
        true => Batch::Together(BulkInsert { prefix: rec.config.prefix.clone() }),
        false => Batch::each(ids),
    })
}

/// One step of Config `prefix`'s `bulk_insert`; `own` is its Config when it is there and of
/// this provider (see [`super::Provider::send_together`]).
pub(super) async fn step(
    ctx: &Env,
    declared: &ProviderIds,
    prefix: &str,
    own: Option<&ConfigRecord>,
) -> Result<Next, TaskError> {
    let gather = match own {
        Some(c) => gce_bulk::gathering(ctx, c).await?,
        None => None,
    };
    // Bulks in flight are followed while more VMs are gathered.
    let open_known = ctx.ports.store.marked(BULKS_OPEN, prefix).await?.is_some();
    if let Some(wait) = gather.filter(|_| !open_known) {
        return Ok(Next::After(wait.min(gce_bulk::GATHER_LOOK)));
    }
    // Nothing in flight and no place for a bulk in the project: its VMs are not read for nothing.
    if let Some(c) = own.filter(|_| !open_known)
        && !gce_bulk::place_free(ctx, &c.config.attributes.project).await
    {
        return Ok(Next::After(gce_bulk::PLACE_WAIT));
    }
    let paused = crate::safety::pause::paused(ctx, own).await?;
    let provider = own.map(|c| declared.resolve(&c.config.provider));
    let (mut open, mut waiting) = (BTreeMap::<String, Vec<Versioned<Vm>>>::new(), Vec::new());
    let mut others = Vec::new();
    for cur in vms_of(ctx, prefix).await? {
        let vm = &cur.value;
        if vm.instance.is_some() {
            continue;
        }
        if !vm.batch.is_empty() {
            open.entry(vm.batch.clone()).or_default().push(cur);
            continue;
        }
        let mine = provider.is_some_and(|p| declared.resolve(&vm.provider) == p);
        if vm.insert_sent.is_some() || vm.insert_attempt > 0 || !mine {
            others.push(CreateInstance { id: vm.id.clone() });
            continue;
        }
        if gather.is_some() {
            continue;
        }
        if sendable(ctx, declared, own, paused.as_ref(), vm).await? {
            waiting.push(cur);
        }
    }
    if open.is_empty() && open_known {
        ctx.ports.store.unmark(BULKS_OPEN, prefix).await?;
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
async fn vms_of(ctx: &Env, prefix: &str) -> Result<Vec<Versioned<Vm>>, TaskError> {
    let ids = ctx.ports.store.vm_ids(VmIndex::UncreatedOf(prefix.to_owned())).await?;
    let all = each(ids, |id| async move {
        match ctx.ports.store.vm(&id).await {
            Ok(vm) => Ok(vm),
            Err(StoreError::Corrupt { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    Ok(all.into_iter().flatten().collect())
}
