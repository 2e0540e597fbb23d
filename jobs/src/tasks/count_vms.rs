//! `count_vms`: counts a Config's VMs (configured, created, connected, draining, dead,
//! unhealthy) into its status; drops the status of a Config that is gone and has no VM left.

use gce_backend_queues::payload::CountVms;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::status::tally;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: CountVms) -> Result<(), TaskError> {
    match tally(&*ctx.store, &t.prefix, ctx.now()).await? {
        (counts, true) => ctx.store.put_counts(&t.prefix, &counts).await?,
        (_, false) => ctx.store.drop_status(&t.prefix).await?,
    }
    Ok(())
}
