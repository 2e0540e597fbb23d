//! `audit_instances`: every zone of every Config's project → `audit_instances`, and every such
//! project → `audit_templates` (spread over `timing.fan_out_jitter`).

use crate::env::Ports;
use crate::work::{AuditInstances, AuditTemplates};

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once; a project whose zones cannot be listed is skipped (and logged).
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let Ports { compute, .. } = &ctx.ports;
    let (mut tasks, mut templates) = (Vec::new(), Vec::new());
    for project in super::reach::projects(ctx).await? {
        templates.push(AuditTemplates { project: project.clone() });
        match compute.zones(&project).await {
            Ok(zones) => {
                tasks.extend(zones.into_iter().map(|zone| AuditInstances { project: project.clone(), zone }))
            }
            // Held back (the project's open breaker, its rate limit): said once by the breaker.
            Err(e) if e.retry_after.is_some() => {
                tracing::debug!(project, error = %e, "zones not listed now; project not audited this time")
            }
            Err(e) => tracing::warn!(project, error = %e, "cannot list zones; project not audited this time"),
        }
    }
    Ok(ctx.push_spread(&tasks).await? + ctx.push_spread(&templates).await?)
}
