//! `expand_config`: brings a Config's amount up to date and pushes `create_vm` for each missing
//! VM id. It never deletes: shrinking is `drain_vm`'s.

use std::collections::HashSet;

use gce_backend_queues::payload::{CreateVm, ExpandConfig};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::ports::store::{Expect, VmIndex};

/// Handles one task.
pub async fn run(ctx: &Ctx, t: ExpandConfig) -> Result<(), TaskError> {
    let Some(cur) = ctx.store.config(&t.prefix).await? else { return Ok(()) };
    let amount = cur.value.config.amount.at(cur.value.current_amount, ctx.now());
    if amount != cur.value.current_amount {
        let mut rec = cur.value.clone();
        rec.current_amount = amount;
        if !ctx.store.put_config(&rec, Expect::Version(cur.version)).await? {
            return Err(TaskError::Conflict(t.prefix));
        }
    }
    let existing: HashSet<String> =
        ctx.store.vm_ids(VmIndex::OfConfig(t.prefix.clone())).await?.into_iter().collect();
    let missing: Vec<CreateVm> = (0..amount)
        .map(|i| format!("{}-{i}", t.prefix))
        .filter(|id| !existing.contains(id))
        .map(|id| CreateVm { id })
        .collect();
    ctx.push_many(&missing).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use gce_backend_queues::payload::{CreateVm, ExpandConfig};

    use super::*;

    #[tokio::test]
    async fn pushes_create_vm_for_missing_ids_only() {
        let (ctx, _) = Ctx::test();
        run(&ctx, ExpandConfig { prefix: "none".into() }).await.unwrap();
        ctx.seed_config("linux", 3).await;
        ctx.seed_vm("linux-1", |_| {}).await;
        run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
        let ids: Vec<String> = ctx.taken::<CreateVm>().await.into_iter().map(|t| t.id).collect();
        assert_eq!(ids, ["linux-0", "linux-2"]);
    }
}
