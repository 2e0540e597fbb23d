//! `count_vms`: first rebuilds the derived keys flagged for it or found unusable, and compares one
//! Config's with its records (`heal::check`), then
//! every Config, and every prefix that still has VMs → `count_vms`.

use crate::work::CountVms;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    // (A rebuild that fails is tried again next tick; the counts go on.)
    if let Err(e) = crate::heal::check(ctx).await {
        tracing::warn!(error = %e, "checking the indexes failed; tried again next tick");
    }
    let prefixes = crate::status::prefixes(&*ctx.store).await?;
    ctx.push_many(&prefixes.into_iter().map(|prefix| CountVms { prefix }).collect::<Vec<_>>()).await
}
