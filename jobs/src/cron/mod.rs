//! Cron jobs: each lists what it needs (through an index, never a scan of every VM) and pushes
//! one task per entity. They run once per tick across all processes (the scheduler claims each
//! tick) and are harmless when run twice.

pub mod audit_instances;
pub mod count_vms;
pub mod create_instances;
pub mod delete_stale_bots;
pub mod drain_vms;
pub mod expand_configs;
pub mod import_configs;
pub mod inspect_instances;
pub mod inspect_swarming;
pub mod manage_bots;
mod reach;
pub mod read_demand;
pub mod refresh_prices;
pub mod report_quota;
pub mod sample_series;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// A cron job's run: returns how many tasks it added.
pub type Run = for<'a> fn(&'a Ctx) -> futures::future::BoxFuture<'a, Result<usize, TaskError>>;

/// Every cron job, by name: the one table (the settings' defaults and the scheduler read it).
pub const JOBS: &[(&str, Run)] = &[
    ("import_configs", |c| Box::pin(import_configs::run(c))),
    ("expand_configs", |c| Box::pin(expand_configs::run(c))),
    ("create_instances", |c| Box::pin(create_instances::run(c))),
    ("manage_bots", |c| Box::pin(manage_bots::run(c))),
    ("inspect_swarming", |c| Box::pin(inspect_swarming::run(c))),
    ("inspect_instances", |c| Box::pin(inspect_instances::run(c))),
    ("drain_vms", |c| Box::pin(drain_vms::run(c))),
    ("audit_instances", |c| Box::pin(audit_instances::run(c))),
    ("delete_stale_bots", |c| Box::pin(delete_stale_bots::run(c))),
    ("count_vms", |c| Box::pin(count_vms::run(c))),
    ("report_quota", |c| Box::pin(report_quota::run(c))),
    ("sample_series", |c| Box::pin(sample_series::run(c))),
    ("read_demand", |c| Box::pin(read_demand::run(c))),
    ("refresh_prices", |c| Box::pin(refresh_prices::run(c))),
];

/// How often cron job `job` runs when the settings do not say: every minute, but the reading of
/// demand (every 10 s: pending work waits on it) and of prices (hourly: it reads the Catalog once
/// a day, sooner after a failure).
pub fn default_every(job: &str) -> &'static str {
    match job {
        "read_demand" => "10s",
        "refresh_prices" => "1h",
        _ => "60s",
    }
}

/// The names of the cron jobs.
pub fn names() -> impl Iterator<Item = &'static str> {
    JOBS.iter().map(|(name, _)| *name)
}

/// Runs cron job `job` once; returns how many tasks it added.
pub async fn run(ctx: &Ctx, job: &str) -> Result<usize, TaskError> {
    let Some((name, run)) = JOBS.iter().find(|(name, _)| *name == job) else {
        return Err(TaskError::Invalid(format!("no cron job {job:?}")));
    };
    // Wall time: how long the run took, not the Clock's notion of now.
    let started = tokio::time::Instant::now();
    let out = run(ctx).await;
    let pushed = *out.as_ref().unwrap_or(&0);
    ctx.metrics.cron(name, out.is_ok(), pushed, started.elapsed().as_secs_f64(), ctx.now());
    out
}
