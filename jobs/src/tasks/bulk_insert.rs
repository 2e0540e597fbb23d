//! `bulk_insert`: sends a Config's VMs waiting for their first instance to Compute Engine
//! together, and follows the bulks it sent (`providers/gce_bulk.rs`).
//!
//! * While the Config's records are still being made and fewer than a full bulk wait, it waits
//!   for more, up to `[timing] bulk_gather`.
//! * Its VMs in a bulk (sent, or claimed for one) are followed until their instances are recorded.
//! * Its VMs waiting for a first insert, of a Compute Engine provider, that may be sent (the one
//!   rule, `lifecycle::sendable`: one no longer made is dropped) are sent, in bulk by (zone,
//!   attributes) or alone when few.
//! * A VM sent alone, or retried after a failed insert, is `create_instance`'s.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};

use crate::config::providers::Kind;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::lifecycle::sendable;
use crate::model::Vm;
use crate::ports::store::{StoreError, Versioned, VmIndex};
use crate::providers::gce_bulk;
use crate::work::{BulkInsert, Next};

/// Handles one task.
pub async fn run(ctx: &Ctx, t: BulkInsert) -> Result<Next, TaskError> {
    let cfg = ctx.store.config(&t.prefix).await?.map(|c| c.value);
    if let Some(c) = &cfg
        && let Some(wait) = gce_bulk::gathering(ctx, c).await?
    {
        return Ok(Next::After(wait));
    }
    let providers = ctx.providers.declared();
    let (mut open, mut waiting) = (BTreeMap::<String, Vec<Versioned<Vm>>>::new(), Vec::new());
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
            continue;
        }
        if sendable(ctx, providers, cfg.as_ref(), vm).await? {
            waiting.push(cur);
        }
    }
    gce_bulk::step(ctx, open.into_values().collect(), waiting).await
}

/// The VM records of Config `prefix` (read a few at a time; one gone or not decoding is left
/// out: it is repaired elsewhere).
async fn vms_of(ctx: &Ctx, prefix: &str) -> Result<Vec<Versioned<Vm>>, TaskError> {
    let ids = ctx.store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await?;
    let read = futures::stream::iter(ids).map(|id| async move {
        match ctx.store.vm(&id).await {
            Ok(vm) => Ok(vm),
            Err(StoreError::Corrupt { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    });
    let all: Vec<Option<Versioned<Vm>>> = read.buffered(32).try_collect().await?;
    Ok(all.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests;
