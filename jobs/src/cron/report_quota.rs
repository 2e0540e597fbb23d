//! `report_quota`: every Config's project → `report_quota` (spread over `timing.fan_out_jitter`).

use crate::work::ReportQuota;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let tasks: Vec<ReportQuota> =
        super::reach::projects(ctx).await?.into_iter().map(|project| ReportQuota { project }).collect();
    ctx.push_spread(&tasks).await
}

#[cfg(test)]
mod tests;
