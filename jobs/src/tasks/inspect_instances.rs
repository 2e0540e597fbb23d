//! `inspect_instances`: one scan of a project and zone for machines that stopped without their
//! bot saying so, by each provider that scans zones (`Provider::scan_zone`; Compute Engine: its
//! instances there that are not RUNNING, `providers/gce_scan.rs`). One that is down and belongs
//! to a VM's current incarnation is replaced at once: Swarming may take many minutes to call its
//! bot dead, the provider says it now.

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::work::{InspectInstances, Next};

/// Handles one task.
pub async fn run(ctx: &Ctx, t: InspectInstances) -> Result<Next, TaskError> {
    ctx.providers.scan_zone(ctx, &t.project, &t.zone).await
}

#[cfg(test)]
mod tests;
