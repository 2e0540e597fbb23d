//! `drain_vms`: VMs whose index is past their Config's amount, or whose Config is gone →
//! `drain_vm`. The index is read from the VM id, so no VM record is read.

use gce_backend_queues::payload::DrainVm;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::ports::store::VmIndex;
use crate::tasks::create_vm::parse_id;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let mut tasks = Vec::new();
    for prefix in ctx.store.vm_configs().await? {
        let amount = ctx.store.config(&prefix).await?.map_or(0, |c| c.value.current_amount);
        for id in ctx.store.vm_ids(VmIndex::OfConfig(prefix.clone())).await? {
            if parse_id(&id).is_none_or(|(_, i)| i >= amount) {
                tasks.push(DrainVm { id });
            }
        }
    }
    ctx.push_many(&tasks).await
}
