//! `drain_vms`: VMs whose index is past their Config's amount, or whose Config is gone →
//! `drain_vm`. The index is read from the VM id, so no VM record is read. A Config whose record
//! or VM index cannot be read is reported (WARN, its status) and skipped; the others go on (a VM
//! index of the wrong type is rebuilt: `heal`).

use crate::env::Ports;
use crate::work::DrainVm;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::naming::parse_id;
use crate::ports::store::{StoreError, VmIndex};

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    let mut tasks = Vec::new();
    let read = store.vm_configs().await;
    let Some(prefixes) = crate::safety::heal::or_skip(ctx, "drain_vms", None, read).await? else {
        return Ok(0);
    };
    for prefix in prefixes {
        let listed = async {
            let config = store.config(&prefix).await?.map(|c| c.value);
            Ok::<_, StoreError>((config, store.vm_ids(VmIndex::OfConfig(prefix.clone())).await?))
        };
        let (config, ids) = match listed.await {
            Ok(v) => v,
            e @ Err(StoreError::Healing { .. }) => {
                crate::safety::heal::or_skip(ctx, "drain_vms", Some(&prefix), e).await?;
                continue;
            }
            // A newer build's Config: its VMs are left to that build.
            Err(StoreError::Newer { key, format }) => {
                crate::records::writes::left_to_newer(ctx, &key, format).await?;
                continue;
            }
            Err(StoreError::Corrupt { key, error, .. }) => {
                let msg = format!("cannot read {key} ({error}): its VMs are not drained this round");
                ctx.record_once(&prefix, "drain_vms", "corrupt", &msg).await?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        tasks.extend(
            ids.into_iter()
                .filter(|id| parse_id(id).is_none_or(|(_, i)| !config.as_ref().is_some_and(|c| c.wants(i))))
                .map(|id| DrainVm { id }),
        );
    }
    ctx.push_many(&tasks).await
}

#[cfg(test)]
mod tests;
