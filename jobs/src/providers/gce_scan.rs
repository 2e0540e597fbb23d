//! What the Compute Engine provider reads of a zone's instances: the periodic scan for stopped
//! ones ([`scan_zone`]) and a Config's instances whose VM records were lost ([`lost`]).
//!
//! * Scan: one walk of a project and zone's instances that carry our deployment label and are
//!   not RUNNING. One that is stopped, preempted or suspended and belongs to a VM's current
//!   incarnation is replaced at once (`lifecycle::replace_down`): Swarming may take many minutes
//!   to call its bot dead, Compute says it now. One parked on purpose (warm) is left alone.
//! * Lost: a Config's instances (labelled with our deployment and the Config) in each of its
//!   zones whose names no VM record has: `making` adopts those its Config still wants.

use crate::config::labels;
use crate::env::Env;
use crate::error::TaskError;
use crate::fleet::lifecycle::replace_down;
use crate::model::ConfigRecord;
use crate::ports::compute::Instance;
use crate::records::writes::read_vm;
use crate::work::Next;

/// The stage a scan's findings are recorded under (the queue's, `inspect_instances`).
const STAGE: &str = "inspect_instances";

/// One walk of `zone` in `project` (every page).
pub(super) async fn scan_zone(ctx: &Env, project: &str, zone: &str) -> Result<Next, TaskError> {
    let filter =
        format!("(labels.{} = \"{}\") (status != \"RUNNING\")", labels::DEPLOYMENT, ctx.settings.deployment);
    let mut page = None;
    loop {
        let (instances, next) = ctx.ports.compute.list(project, zone, &filter, page).await?;
        let down: Vec<_> = instances.into_iter().filter(|i| i.is_down()).collect();
        let names: Vec<String> = down.iter().map(|i| i.name.clone()).collect();
        for (inst, id) in down.iter().zip(ctx.ports.store.vms_by_hostname(&names).await?) {
            let Some(id) = id else { continue }; // a leak: audit_instances' business
            let Some(vm) = read_vm(ctx, &id).await? else { continue };
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

/// Config `rec`'s instances that no VM record names, with their zones: one instances.list per
/// zone of the Config (every page).
pub(super) async fn lost(ctx: &Env, rec: &ConfigRecord) -> Result<Vec<(String, Instance)>, TaskError> {
    let prefix = &rec.config.prefix;
    let filter = format!(
        "labels.{} = \"{}\" AND labels.{} = \"{prefix}\"",
        labels::DEPLOYMENT,
        ctx.settings.deployment,
        labels::CONFIG
    );
    let project = &rec.config.attributes.project;
    let mut out = Vec::new();
    for zone in rec.config.zone_names() {
        let mut page = None;
        loop {
            let (instances, next) = ctx.ports.compute.list(project, zone, &filter, page).await?;
            let names: Vec<String> = instances.iter().map(|i| i.name.clone()).collect();
            let vms = ctx.ports.store.vms_by_hostname(&names).await?;
            let missing = instances.into_iter().zip(vms).filter(|(_, vm)| vm.is_none());
            out.extend(missing.map(|(instance, _)| (zone.to_owned(), instance)));
            match next {
                Some(p) => page = Some(p),
                None => break,
            }
        }
    }
    Ok(out)
}
