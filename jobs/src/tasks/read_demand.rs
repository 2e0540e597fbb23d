//! `read_demand`: reads the work of one Swarming server's demand-driven Configs (`demand::read`:
//! one `CountTasks` per dimension set) and records each Config's target; a Config whose target
//! changed is expanded at once.

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::work::{Next, ReadDemand};

/// Handles one task.
pub async fn run(ctx: &Ctx, t: ReadDemand) -> Result<Next, TaskError> {
    crate::demand::read(ctx, &t.server).await?;
    Ok(Next::Done)
}
