//! `manage_bots`: every VM with an instance → `manage_bot`.

use crate::tasks::ManageBot;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::ports::store::VmIndex;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let ids = ctx.store.vm_ids(VmIndex::Created).await?;
    ctx.push_many(&ids.into_iter().map(|id| ManageBot { id }).collect::<Vec<_>>()).await
}
