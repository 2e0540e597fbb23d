//! `read_demand`: every Swarming server with a demand-driven Config → `read_demand` (its pending
//! tasks counted, each Config's target set).

use std::collections::BTreeSet;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::work::ReadDemand;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let servers: BTreeSet<String> = ctx
        .ports
        .store
        .configs()
        .await?
        .into_iter()
        .filter(|c| c.value.config.demand.is_some())
        .map(|c| c.value.config.swarming)
        .collect();
    let tasks: Vec<ReadDemand> = servers.into_iter().map(|server| ReadDemand { server }).collect();
    ctx.push_many(&tasks).await
}
