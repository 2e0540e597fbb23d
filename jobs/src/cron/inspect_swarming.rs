//! `inspect_swarming`: every Swarming server of a Config → `inspect_swarming` (one ListBots walk;
//! spread over `timing.fan_out_jitter`).

use crate::work::InspectSwarming;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let tasks: Vec<InspectSwarming> =
        super::reach::servers(ctx).await?.into_iter().map(|server| InspectSwarming { server }).collect();
    ctx.push_spread(&tasks).await
}
