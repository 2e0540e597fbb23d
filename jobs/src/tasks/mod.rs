//! One handler per queue, named after it. Each re-reads the records, compares, acts on the
//! difference and records it with a compare-and-set; none cares why it was called.

pub mod audit_instances;
pub mod count_vms;
pub mod create_instance;
pub mod create_vm;
pub mod delete_bot;
pub mod delete_stale_bots;
pub mod destroy_instance;
pub mod drain_vm;
pub mod expand_config;
pub mod inspect_swarming;
pub mod manage_bot;
pub mod report_quota;
pub mod terminate_bot;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::Vm;
use crate::ports::store::Expect;

/// Applies `change` to the VM `id` with a compare-and-set, re-reading on a lost race. `change`
/// returns false to leave the record alone. Returns the VM as written (or as found), `None` if
/// it is gone.
pub async fn update_vm(
    ctx: &Ctx,
    id: &str,
    change: impl Fn(&mut Vm) -> bool,
) -> Result<Option<Vm>, TaskError> {
    for _ in 0..5 {
        let Some(cur) = ctx.store.vm(id).await? else { return Ok(None) };
        let mut vm = cur.value;
        if !change(&mut vm) {
            return Ok(Some(vm));
        }
        if ctx.store.put_vm(&vm, Expect::Version(cur.version)).await? {
            return Ok(Some(vm));
        }
    }
    Err(TaskError::Conflict(id.to_owned()))
}
