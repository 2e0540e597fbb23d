//! `create_instances`: every VM without an instance → `create_instance`.

use crate::tasks::CreateInstance;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::ports::store::VmIndex;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let ids = ctx.store.vm_ids(VmIndex::Uncreated).await?;
    ctx.push_many(&ids.into_iter().map(|id| CreateInstance { id }).collect::<Vec<_>>()).await
}
