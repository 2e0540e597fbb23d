//! `expand_configs`: every Config → `expand_config`.

use crate::work::ExpandConfig;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let tasks: Vec<ExpandConfig> = ctx
        .ports
        .store
        .configs()
        .await?
        .into_iter()
        .map(|c| ExpandConfig { prefix: c.value.config.prefix })
        .collect();
    ctx.push_many(&tasks).await
}
