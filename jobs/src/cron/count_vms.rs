//! `count_vms`: every Config, and every prefix that still has VMs → `count_vms`.

use std::collections::BTreeSet;

use gce_backend_queues::payload::CountVms;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let mut prefixes: BTreeSet<String> =
        ctx.store.configs().await?.into_iter().map(|c| c.value.config.prefix).collect();
    prefixes.extend(ctx.store.vm_configs().await?);
    ctx.push_many(&prefixes.into_iter().map(|prefix| CountVms { prefix }).collect::<Vec<_>>()).await
}
