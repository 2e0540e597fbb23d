//! `audit_instances`: finds leaked instances in one project and zone: instances carrying our
//! deployment label whose name matches no VM. A leak is marked when first seen and deleted (with a
//! deterministic `plug-<name>` requestId) only if still leaked `leak_grace` later. Instances without
//! our label are never listed, so never touched.

use std::collections::HashSet;

use crate::work::{AuditInstances, Next};
use crate::config::labels;
use crate::ctx::Ctx;
use crate::model::marks::LEAKS;
use crate::env::request_id;
use crate::error::TaskError;


/// Handles one task.
pub async fn run(ctx: &Ctx, t: AuditInstances) -> Result<Next, TaskError> {
    let filter = format!("labels.{} = \"{}\"", labels::DEPLOYMENT, ctx.deployment);
    let scope = format!("{}/{}/", t.project, t.zone);
    let mut leaked = HashSet::new();
    let mut page = None;
    loop {
        let (instances, next) = ctx.compute.list(&t.project, &t.zone, &filter, page).await?;
        let names: Vec<String> = instances.into_iter().map(|i| i.name).collect();
        let vms = ctx.store.vms_by_hostname(&names).await?;
        let now = ctx.now();
        for (name, vm) in names.into_iter().zip(vms) {
            if vm.is_some() {
                continue;
            }
            let key = format!("{scope}{name}");
            let first = ctx.store.mark(LEAKS, &key, now).await?;
            if first == now {
                ctx.metrics.cleanup("leaked_instance", "found");
            }
            if first + ctx.timing.leak_grace.chrono() <= now {
                let rid = request_id(&format!("plug-{name}"));
                match ctx.compute.delete(&t.project, &t.zone, &name, &rid).await {
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
    for (key, _) in ctx.store.marks(LEAKS).await? {
        if key.starts_with(&scope) && !leaked.contains(&key) {
            ctx.store.unmark(LEAKS, &key).await?;
        }
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
