//! VMs over the API: one VM with its derived state and bot, a page of a Config's VMs, and
//! recycling one VM (LUCI's Instances.Delete; recorded in its Config's audit trail).

use gce_backend_queues::Task;

use crate::config::Config;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{Vm, VmState, VmView, VmWork, outdated};
use crate::ports::store::{StoreError, VmIndex};
use crate::work::{CreateInstance, CreateVm, ExpandConfig};

use super::shared::{Actor, MAX_PAGE, OpError, audit_on, by_index, order};
use crate::model::AuditAction;

/// Drains one VM so it is replaced (LUCI Instances.Delete; refused for a static machine, which
/// its list manages): sets drained; the normal drain path
/// retires it (its bot terminated, its instance destroyed, its record deleted; one never sent
/// to GCE is dropped at once) and expand_config makes a new incarnation while its index is
/// within the amount (once resumed, if its Config is paused). Recycling it again changes nothing.
pub async fn recycle(ctx: &Ctx, vm_id: &str, by: Actor<'_>) -> Result<Vm, OpError> {
    let gone = || OpError::NotFound(format!("VM {vm_id}"));
    let cur = ctx.vm(vm_id).await?.ok_or_else(gone)?.value;
    if ctx.providers.declared().is_static(&cur.provider) {
        return Err(crate::operate::managed_by_list(&cur.config, "machines"));
    }
    // A VM never sent to Compute is dropped at once (expand_config makes it anew): answer with
    // the record as it was, drained.
    let vm = crate::lifecycle::drain(ctx, &cur).await?.unwrap_or_else(|| Vm { drained: true, ..cur.clone() });
    if !cur.drained {
        tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), by = %by, "VM recycled over the API");
        let detail = format!("VM {} ({})", vm.id, vm.hostname);
        audit_on(ctx, &vm.config, by, AuditAction::Recycle, detail).await;
    }
    ctx.push(&ExpandConfig { prefix: vm.config.clone() }).await?;
    Ok(vm)
}

/// One page of a Config's VMs (sorted by index), optionally only those in `state`; `after` is
/// the last VM id of the previous page. Returns at most `limit` (1 to [`MAX_PAGE`]) and the
/// `after` of the next page when more match. Records that do not decode are left out. NotFound
/// when neither the Config nor any VM of it exists.
pub async fn list_vms(
    ctx: &Ctx,
    prefix: &str,
    state: Option<VmState>,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<VmView>, Option<String>), OpError> {
    let ids = by_index(ctx.store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await?);
    let config = match ctx.store.config(prefix).await {
        Ok(None) if ids.is_empty() => return Err(OpError::NotFound(format!("Config {prefix}"))),
        Ok(rec) => rec.map(|r| r.value.config),
        Err(StoreError::Corrupt { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let limit = limit.clamp(1, MAX_PAGE);
    let start = after.map_or(0, |a| ids.partition_point(|id| order(id) <= order(a)));
    let mut page: Vec<VmView> = Vec::new();
    for id in &ids[start..] {
        let vm = match ctx.store.vm(id).await {
            Ok(Some(v)) => v.value,
            Ok(None) | Err(StoreError::Corrupt { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        if state.is_some_and(|s| s != VmState::of(&vm)) {
            continue;
        }
        if page.len() == limit {
            // One more matches: there is a next page, after this page's last VM.
            let next = page.last().map(|v| v.vm.id.clone());
            return Ok((page, next));
        }
        page.push(view(ctx, vm, config.as_ref()).await?);
    }
    Ok((page, None))
}

/// One VM: its record, derived state, last bot observation.
pub async fn vm(ctx: &Ctx, id: &str) -> Result<VmView, OpError> {
    let Some(v) = ctx.store.vm(id).await? else { return Err(OpError::NotFound(format!("VM {id}"))) };
    let config = match ctx.store.config(&v.value.config).await {
        Ok(rec) => rec.map(|r| r.value.config),
        Err(StoreError::Corrupt { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    Ok(view(ctx, v.value, config.as_ref()).await?)
}

/// The view of a VM record of `config` (`None`: gone or unreadable, so nothing is outdated).
async fn view(ctx: &Ctx, vm: Vm, config: Option<&Config>) -> Result<VmView, TaskError> {
    let bot = ctx.store.bot(&vm.hostname).await?;
    let work = match VmState::of(&vm) {
        VmState::Creating => work(ctx, &vm.id).await?,
        _ => None,
    };
    let outdated = config.is_some_and(|c| outdated(c, &vm));
    Ok(VmView { outdated, work, ..VmView::of(vm, bot) })
}

/// The live task making VM `id` (its instance's, else its record's), if any.
async fn work(ctx: &Ctx, id: &str) -> Result<Option<VmWork>, TaskError> {
    for queue in [CreateInstance::QUEUE, CreateVm::QUEUE] {
        if let Some(t) = ctx.queues.get(queue).status_by_key(id).await? {
            let next_run = if t.state == "pending" { t.run_at } else { None };
            return Ok(Some(VmWork {
                queue: t.queue,
                state: t.state,
                attempts: t.attempts,
                next_run,
                last_error: t.last_error,
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
