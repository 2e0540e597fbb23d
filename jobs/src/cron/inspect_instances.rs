//! `inspect_instances`: every (project, zone) of a Config → `inspect_instances`.

use std::collections::BTreeSet;

use crate::tasks::InspectInstances;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let places: BTreeSet<(String, String)> = ctx
        .store
        .configs()
        .await?
        .into_iter()
        .map(|c| (c.value.config.attributes.project, c.value.config.attributes.zone))
        .collect();
    let tasks: Vec<InspectInstances> =
        places.into_iter().map(|(project, zone)| InspectInstances { project, zone }).collect();
    ctx.push_many(&tasks).await
}
