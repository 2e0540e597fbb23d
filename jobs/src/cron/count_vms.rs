//! `count_vms`: first rebuilds the derived keys flagged for it or found unusable, and compares one
//! Config's with its records (`heal::check`), then
//! every Config, and every prefix that still has VMs → `count_vms`; every Config whose per-pool
//! resources are not made yet, or that holds some of an older revision → `pool_resources` (so a
//! Config's VM records are read for it at most once a tick).

use crate::env::Ports;
use crate::work::{CountVms, PoolResources};

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    // (A rebuild that fails is tried again next tick; the counts go on.)
    if let Err(e) = crate::safety::heal::check(ctx).await {
        tracing::warn!(error = %e, "checking the indexes failed; tried again next tick");
    }
    let prefixes = crate::fleet::status::prefixes(&**store).await?;
    let counted =
        ctx.push_many(&prefixes.into_iter().map(|prefix| CountVms { prefix }).collect::<Vec<_>>()).await?;
    let due: Vec<PoolResources> = ctx
        .ports
        .store
        .configs()
        .await?
        .into_iter()
        .filter(|c| c.value.needs_resources() || c.value.has_old_resources())
        .map(|c| PoolResources { prefix: c.value.config.prefix })
        .collect();
    Ok(counted + ctx.push_many(&due).await?)
}
