//! `inspect_instances`: one walk of a project and zone's instances that carry our deployment
//! label and are not RUNNING. One that is stopped, preempted or suspended and belongs to a VM's
//! current incarnation is replaced at once (`manage_bot::replace_down`): Swarming may take many
//! minutes to call its bot dead, Compute says it now.

use crate::work::{InspectInstances, Next};
use crate::config::labels;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::lifecycle::replace_down;


const STAGE: &str = "inspect_instances";

/// Handles one task.
pub async fn run(ctx: &Ctx, t: InspectInstances) -> Result<Next, TaskError> {
    let filter = format!("(labels.{} = \"{}\") (status != \"RUNNING\")", labels::DEPLOYMENT, ctx.deployment);
    let mut page = None;
    loop {
        let (instances, next) = ctx.compute.list(&t.project, &t.zone, &filter, page).await?;
        let down: Vec<_> = instances.into_iter().filter(|i| i.is_down()).collect();
        let names: Vec<String> = down.iter().map(|i| i.name.clone()).collect();
        for (inst, id) in down.iter().zip(ctx.store.vms_by_hostname(&names).await?) {
            let Some(id) = id else { continue }; // a leak: audit_instances' business
            let Some(vm) = ctx.vm(&id).await? else { continue };
            // Kept warm: suspended or stopped on purpose.
            if vm.value.hostname == inst.name && vm.value.instance.is_some() && vm.value.parked.is_none() {
                replace_down(ctx, &vm.value, Some(&inst.status), STAGE).await?;
            }
        }
        match next {
            Some(p) => page = Some(p),
            None => return Ok(Next::Done),
        }
    }
}

#[cfg(test)]
mod tests;
