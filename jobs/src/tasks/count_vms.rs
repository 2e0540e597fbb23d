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
    let configured = store.config(prefix).await?.map_or(0, |c| c.value.current_amount);
    let mut counts = Counts { configured, at: Some(now), ..Counts::default() };
    for id in store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await? {
        let Some(vm) = store.vm(&id).await? else { continue };
        let vm = vm.value;
        counts.created += u32::from(!vm.url.is_empty());
        counts.connected += u32::from(vm.connected.is_some() && !vm.url.is_empty());
        counts.draining += u32::from(vm.drained);
    }
    Ok(counts)
}

/// Handles one task.
pub async fn run(ctx: &Ctx, t: CountVms) -> Result<(), TaskError> {
    let counts = count(ctx, &t.prefix).await?;
    let gone = ctx.store.config(&t.prefix).await?.is_none()
        && ctx.store.vm_ids(VmIndex::OfConfig(t.prefix.clone())).await?.is_empty();
    if gone {
        ctx.store.drop_status(&t.prefix).await?;
    } else {
        ctx.store.put_counts(&t.prefix, &counts).await?;
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
