//! `count_vms`: every Config, and every prefix that still has VMs → `count_vms`.

use crate::tasks::CountVms;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let prefixes = crate::status::prefixes(&*ctx.store).await?;
    ctx.push_many(&prefixes.into_iter().map(|prefix| CountVms { prefix }).collect::<Vec<_>>()).await
}
