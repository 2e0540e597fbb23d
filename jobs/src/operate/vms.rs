//! VMs over the API: one VM with its derived state and bot, a page of a Config's VMs, and
//! recycling one VM (LUCI's Instances.Delete; recorded in its Config's audit trail).

use gce_backend_queues::{Task, TaskStatus};

use crate::config::Config;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{Vm, VmState, VmView, VmWork, outdated};
use crate::ports::store::VmIndex;
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
    let vm = crate::fleet::lifecycle::drain(ctx, &cur)
        .await?
        .unwrap_or_else(|| Vm { drained: true, ..cur.clone() });
    if !cur.drained {
        tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), by = %by, "VM recycled over the API");
        let detail = format!("VM {} ({})", vm.id, vm.hostname);
        audit_on(ctx, &vm.config, by, AuditAction::Recycle, detail).await;
    }
    ctx.push(&ExpandConfig { prefix: vm.config.clone() }).await?;
    Ok(vm)
}

/// One page of a Config's VMs (sorted by index), optionally only those in `state`; `after` is
/// the last VM id of the previous page. `config`: the Config as the caller read it (`None`: gone
/// or unreadable, so nothing is outdated). Returns at most `limit` (1 to [`MAX_PAGE`]) and the
/// `after` of the next page when more match. Records that do not decode are left out. NotFound
/// when neither the Config nor any VM of it exists.
pub async fn list_vms(
    ctx: &Ctx,
    prefix: &str,
    config: Option<&Config>,
    state: Option<VmState>,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<VmView>, Option<String>), OpError> {
    let ids = by_index(ctx.ports.store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await?);
    if config.is_none() && ids.is_empty() {
        return Err(OpError::NotFound(format!("Config {prefix}")));
    }
    let limit = limit.clamp(1, MAX_PAGE);
    let start = after.map_or(0, |a| ids.partition_point(|id| order(id) <= order(a)));
    let mut page: Vec<VmView> = Vec::new();
    for id in &ids[start..] {
        let Some(vm) = crate::records::writes::readable_vm(ctx, id).await? else { continue };
        if state.is_some_and(|s| s != VmState::of(&vm)) {
            continue;
        }
        if page.len() == limit {
            // One more matches: there is a next page, after this page's last VM.
            let next = page.last().map(|v| v.vm.id.clone());
            return Ok((page, next));
        }
        // Only a VM being made has work to show: read its making queues alone.
        let tasks = match VmState::of(&vm) {
            VmState::Creating => live_tasks(ctx, id, &MAKING).await?,
            _ => Vec::new(),
        };
        page.push(view(ctx, vm, config, &tasks).await?);
    }
    Ok((page, None))
}

/// One VM: its record, derived state, last bot observation, and its live (pending or running)
/// tasks on every queue, read once. `config`: its Config as the caller read it (`None`: gone or
/// unreadable, so it is not outdated).
pub async fn vm(ctx: &Ctx, id: &str, config: Option<&Config>) -> Result<(VmView, Vec<TaskStatus>), OpError> {
    let Some(v) = ctx.ports.store.vm(id).await? else { return Err(OpError::NotFound(format!("VM {id}"))) };
    let tasks = live_tasks(ctx, id, crate::tasks::QUEUES).await?;
    Ok((view(ctx, v.value, config, &tasks).await?, tasks))
}

/// The queues whose tasks make a VM, the instance's first.
const MAKING: [&str; 2] = [CreateInstance::QUEUE, CreateVm::QUEUE];

/// The live tasks keyed by VM `id` on `queues`, in their order.
async fn live_tasks(ctx: &Ctx, id: &str, queues: &[&str]) -> Result<Vec<TaskStatus>, TaskError> {
    let mut tasks = Vec::new();
    for q in queues {
        tasks.extend(ctx.queues.get(q).status_by_key(id).await?);
    }
    Ok(tasks)
}

/// The view of a VM record of `config` (`None`: gone or unreadable, so nothing is outdated),
/// `tasks` its live tasks (those it is being made by, at least, while it is `creating`).
async fn view(ctx: &Ctx, vm: Vm, config: Option<&Config>, tasks: &[TaskStatus]) -> Result<VmView, TaskError> {
    let bot = ctx.ports.store.bot(&vm.hostname).await?;
    let work = match VmState::of(&vm) {
        VmState::Creating => work(tasks),
        _ => None,
    };
    let outdated = config.is_some_and(|c| outdated(c, &vm));
    Ok(VmView { outdated, work, ..VmView::of(vm, bot) })
}

/// Of a VM's live `tasks`, the one making it (its instance's, else its record's), if any, in the
/// API's shape.
fn work(tasks: &[TaskStatus]) -> Option<VmWork> {
    let t = MAKING.iter().find_map(|q| tasks.iter().find(|t| t.queue == *q))?.clone();
    // `run_at` is set only while it is pending.
    Some(VmWork {
        queue: t.queue,
        state: t.state,
        attempts: t.attempts,
        next_run: t.run_at,
        last_error: t.last_error,
    })
}

#[cfg(test)]
mod tests;
