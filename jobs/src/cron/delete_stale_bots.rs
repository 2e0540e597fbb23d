//! `delete_stale_bots`: every Swarming server of a Config → `delete_stale_bots`.

use crate::work::DeleteStaleBots;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let tasks: Vec<DeleteStaleBots> =
        super::reach::servers(ctx).await?.into_iter().map(|server| DeleteStaleBots { server }).collect();
    ctx.push_many(&tasks).await
}
