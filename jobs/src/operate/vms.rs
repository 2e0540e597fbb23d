//! VMs over the API: one VM with its derived state and bot, a page of a Config's VMs, and
//! recycling one VM (LUCI's Instances.Delete; recorded in its Config's audit trail).

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{Vm, VmState, VmView};
use crate::ports::store::{StoreError, VmIndex};
use crate::work::ExpandConfig;

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
    if ids.is_empty() {
        match ctx.store.config(prefix).await {
            Ok(None) => return Err(OpError::NotFound(format!("Config {prefix}"))),
            Ok(Some(_)) | Err(StoreError::Corrupt { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
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
        page.push(view(ctx, vm).await?);
    }
    Ok((page, None))
}

/// One VM: its record, derived state, last bot observation.
pub async fn vm(ctx: &Ctx, id: &str) -> Result<VmView, OpError> {
    match ctx.store.vm(id).await? {
        Some(v) => Ok(view(ctx, v.value).await?),
        None => Err(OpError::NotFound(format!("VM {id}"))),
    }
}

/// The view of a VM record.
async fn view(ctx: &Ctx, vm: Vm) -> Result<VmView, TaskError> {
    let bot = ctx.store.bot(&vm.hostname).await?;
    Ok(VmView::of(vm, bot))
}

#[cfg(test)]
mod tests;
