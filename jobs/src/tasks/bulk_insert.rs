//! `bulk_insert`: sends a Config's new VMs that its provider put together
//! (`Provider::create_batch`), and follows what was sent together, through the providers
//! (`Providers::send_together`; Compute Engine: bulk inserts, `providers/gce_send.rs`). Each
//! provider follows what it sent; the Config's own provider also sends what waits, and hands its
//! VMs sent alone or retried on to `create_instance`.

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::work::{BulkInsert, Next};

/// Handles one task.
pub async fn run(ctx: &Ctx, t: BulkInsert) -> Result<Next, TaskError> {
    ctx.providers.send_together(ctx, &t.prefix).await
}

#[cfg(test)]
mod tests;
