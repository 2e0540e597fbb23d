//! `count_vms`: counts a Config's VMs (configured, created, connected, draining) into its status;
//! drops the status of a Config that is gone and has no VM left.

use gce_backend_queues::payload::CountVms;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::Counts;
use crate::ports::store::VmIndex;

/// Counts a Config's VMs now, from their records.
pub async fn count(ctx: &Ctx, prefix: &str) -> Result<Counts, TaskError> {
    count_in(&*ctx.store, prefix, ctx.now()).await
}

/// [`count`] on a bare store.
pub async fn count_in(
    store: &dyn crate::ports::store::Store,
    prefix: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Counts, TaskError> {
    Ok(tally(store, prefix, now).await?.0)
}

/// The counts, and whether anything of the Config is left (its record or a VM).
async fn tally(
    store: &dyn crate::ports::store::Store,
    prefix: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(Counts, bool), TaskError> {
    let config = store.config(prefix).await?;
    let ids = store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await?;
    let left = config.is_some() || !ids.is_empty();
    let configured = config.map_or(0, |c| c.value.current_amount);
    let mut counts = Counts { configured, at: Some(now), ..Counts::default() };
    for id in ids {
        let Some(vm) = store.vm(&id).await? else { continue };
        let vm = vm.value;
        counts.created += u32::from(!vm.url.is_empty());
        counts.connected += u32::from(vm.connected.is_some() && !vm.url.is_empty());
        counts.draining += u32::from(vm.drained);
    }
    Ok((counts, left))
}

/// Every prefix with a Config or with VMs left (of a removed Config), sorted.
pub async fn prefixes(store: &dyn crate::ports::store::Store) -> Result<Vec<String>, TaskError> {
    let mut p: std::collections::BTreeSet<String> =
        store.configs().await?.into_iter().map(|c| c.value.config.prefix).collect();
    p.extend(store.vm_configs().await?);
    Ok(p.into_iter().collect())
}

/// Handles one task.
pub async fn run(ctx: &Ctx, t: CountVms) -> Result<(), TaskError> {
    match tally(&*ctx.store, &t.prefix, ctx.now()).await? {
        (counts, true) => ctx.store.put_counts(&t.prefix, &counts).await?,
        (_, false) => ctx.store.drop_status(&t.prefix).await?,
    }
    Ok(())
}

/// A Config's status: the counts last written by `count_vms`, its last errors (newest first) and
/// the backoff of its (project, zone) while active.
pub async fn status(
    store: &dyn crate::ports::store::Store,
    prefix: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<crate::model::ConfigStatus, TaskError> {
    let counts = store.counts(prefix).await?.unwrap_or_default();
    let errors = store.errors(prefix).await?;
    let backoff = match store.config(prefix).await? {
        Some(c) => {
            let a = &c.value.config.attributes;
            store.backoff(&a.project, &a.zone).await?.filter(|b| b.until > now)
        }
        None => None,
    };
    Ok(crate::model::ConfigStatus { prefix: prefix.to_owned(), counts, errors, backoff })
}
