//! `report_quota`: reads a project's regional quotas and reports them (the `quota_usage` and
//! `quota_limit` gauges; a debug line each), warning when a quota is nearly used up.

use crate::env::Ports;
use crate::work::{Next, ReportQuota};
use crate::ctx::Ctx;
use crate::error::TaskError;


/// Handles one task.
pub async fn run(ctx: &Ctx, t: ReportQuota) -> Result<Next, TaskError> {
    let Ports { compute, .. } = &ctx.ports;
    for q in compute.quotas(&t.project).await? {
        ctx.metrics.quota(&t.project, &q.region, &q.metric, q.usage, q.limit);
        if q.limit > 0.0 && q.usage >= 0.9 * q.limit {
            tracing::warn!(project = %t.project, region = %q.region, metric = %q.metric, usage = q.usage, limit = q.limit, "quota nearly used up");
        } else {
            tracing::debug!(project = %t.project, region = %q.region, metric = %q.metric, usage = q.usage, limit = q.limit, "quota");
        }
    }
    Ok(Next::Done)
}
