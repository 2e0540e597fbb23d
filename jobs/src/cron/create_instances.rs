//! `create_instances`: every VM without an instance → `create_instance`.

use crate::work::CreateInstance;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::ports::store::VmIndex;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let read = ctx.store.vm_ids(VmIndex::Uncreated).await;
    let Some(ids) = crate::heal::or_skip(ctx, "create_instances", None, read).await? else { return Ok(0) };
    ctx.push_many(&ids.into_iter().map(|id| CreateInstance { id }).collect::<Vec<_>>()).await
}
