//! `count_vms`: writes a Config's counts (configured, created, running, connected, draining,
//! dead, unhealthy) into its status, from the store's per-Config sums (O(1)); drops the status of
//! a Config that is gone and has no VM left.

use crate::env::Ports;
use crate::work::{CountVms, Next};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::records::counts::tally;


/// Handles one task.
pub async fn run(ctx: &Ctx, t: CountVms) -> Result<Next, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    match tally(&**store, &t.prefix, ctx.now()).await? {
        (counts, true) => store.put_counts(&t.prefix, &counts).await?,
        (_, false) => store.drop_status(&t.prefix).await?,
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
