//! `create_vm`: makes one VM record (id `<prefix>-<index>`) if it does not exist, is still
//! wanted (or kept warm) and its Config is not held, and hands it on (`making.rs`: the one way a
//! record is made, shared with `expand_config`'s batches).

use crate::env::Ports;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::making;
use crate::naming::parse_id;
use crate::work::{CreateVm, Next};

/// Handles one task.
pub async fn run(ctx: &Ctx, t: CreateVm) -> Result<Next, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    if ctx.vm(&t.id).await?.is_some() {
        return Ok(Next::Done);
    }
    let (prefix, index) = parse_id(&t.id).ok_or_else(|| TaskError::Invalid(format!("VM id {:?}", t.id)))?;
    let Some(cfg) = store.config(prefix).await? else { return Ok(Next::Done) };
    if !cfg.value.makes(index) || crate::safety::pause::held(ctx, &cfg.value, Some(&t.id)).await?.is_some() {
        return Ok(Next::Done); // resuming a paused Config expands it again
    }
    making::make_all(ctx, &cfg.value, &[t.id]).await?;
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
