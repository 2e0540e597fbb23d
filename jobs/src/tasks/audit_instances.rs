//! `audit_instances`: finds leaked instances in one project and zone: instances carrying our
//! deployment label whose name matches no VM. One whose VM record was lost (a Redis failover)
//! while its Config still wants that VM is adopted back from its labels (`making::adopt`), not
//! made again. Any other is a leak: marked when first seen and deleted (with a deterministic
//! `plug-<name>` requestId) only if still leaked `leak_grace` later. Instances without our label
//! are never listed, so never touched.

use std::collections::HashSet;

use crate::env::Ports;
use crate::config::labels;
use crate::ctx::Ctx;
use crate::env::request_id;
use crate::error::TaskError;
use crate::making;
use crate::model::marks::LEAKS;
use crate::ports::compute::Instance;
use crate::ports::store::StoreError;
use crate::work::{AuditInstances, Next};

/// Handles one task.
pub async fn run(ctx: &Ctx, t: AuditInstances) -> Result<Next, TaskError> {
    let Ports { store, compute, .. } = &ctx.ports;
    let filter = format!("labels.{} = \"{}\"", labels::DEPLOYMENT, ctx.settings.deployment);
    let scope = format!("{}/{}/", t.project, t.zone);
    let mut leaked = HashSet::new();
    let mut page = None;
    loop {
        let (instances, next) = compute.list(&t.project, &t.zone, &filter, page).await?;
        let names: Vec<String> = instances.iter().map(|i| i.name.clone()).collect();
        let vms = store.vms_by_hostname(&names).await?;
        let now = ctx.now();
        for (instance, vm) in instances.into_iter().zip(vms) {
            if vm.is_some() || adopted(ctx, &t, &instance).await? {
                continue;
            }
            let name = instance.name;
            let key = format!("{scope}{name}");
            let first = store.mark(LEAKS, &key, now).await?;
            if first == now {
                ctx.metrics.cleanup("leaked_instance", "found");
            }
            if first + ctx.settings.timing.leak_grace.chrono() <= now {
                let rid = request_id(&format!("plug-{name}"));
                match compute.delete(&t.project, &t.zone, &name, &rid).await {
                    Ok(_) => {
                        ctx.metrics.cleanup("leaked_instance", "deleted");
                        tracing::info!(project = %t.project, zone = %t.zone, instance = %name, "deleted a leaked instance")
                    }
                    // Held back (rate limit, open breaker): the audit waits for the way to open.
                    Err(e) if e.retry_after.is_some() => return Err(e.into()),
                    // One instance that cannot be deleted (protection, permissions) must not stop the audit.
                    Err(e) => {
                        tracing::warn!(project = %t.project, zone = %t.zone, instance = %name, error = %e, "cannot delete a leaked instance")
                    }
                }
            }
            leaked.insert(key);
        }
        match next {
            Some(p) => page = Some(p),
            None => break,
        }
    }
    // Forget candidates that are no longer leaked (adopted, or gone).
    for (key, _) in store.marks(LEAKS).await? {
        if key.starts_with(&scope) && !leaked.contains(&key) {
            store.unmark(LEAKS, &key).await?;
        }
    }
    Ok(Next::Done)
}

/// Adopts `instance` when its VM record was lost: its labels name a VM of a Config of this
/// project that still wants that VM and has no record of that id (a record of another
/// incarnation makes it a leak), and the instance is not on its way down.
async fn adopted(ctx: &Ctx, t: &AuditInstances, instance: &Instance) -> Result<bool, TaskError> {
    let Some(prefix) = instance.labels.get(labels::CONFIG) else { return Ok(false) };
    let rec = match ctx.ports.store.config(prefix).await {
        Ok(Some(rec)) => rec.value,
        // No Config, or one another build owns: not ours to adopt into.
        Ok(None) | Err(StoreError::Newer { .. }) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    match making::adoptable(&rec, instance) {
        Some(slot) if rec.config.attributes.project == t.project => {
            making::adopt(ctx, &rec, slot, &t.zone, instance).await
        }
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests;
