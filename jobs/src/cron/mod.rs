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
pub mod report_quota;

use std::collections::BTreeSet;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Every cron job, by name.
pub const JOBS: &[&str] = &[
    "import_configs",
    "expand_configs",
    "create_instances",
    "manage_bots",
    "inspect_swarming",
    "inspect_instances",
    "drain_vms",
    "audit_instances",
    "delete_stale_bots",
    "count_vms",
    "report_quota",
];

/// Runs cron job `job` once; returns how many tasks it added.
pub async fn run(ctx: &Ctx, job: &str) -> Result<usize, TaskError> {
    match job {
        "import_configs" => import_configs::run(ctx).await,
        "expand_configs" => expand_configs::run(ctx).await,
        "create_instances" => create_instances::run(ctx).await,
        "manage_bots" => manage_bots::run(ctx).await,
        "inspect_swarming" => inspect_swarming::run(ctx).await,
        "inspect_instances" => inspect_instances::run(ctx).await,
        "drain_vms" => drain_vms::run(ctx).await,
        "audit_instances" => audit_instances::run(ctx).await,
        "delete_stale_bots" => delete_stale_bots::run(ctx).await,
        "count_vms" => count_vms::run(ctx).await,
        "report_quota" => report_quota::run(ctx).await,
        other => Err(TaskError::Invalid(format!("no cron job {other:?}"))),
    }
}

/// Swarming servers of every Config, and of stale-bot candidates (of removed Configs too).
async fn servers(ctx: &Ctx) -> Result<BTreeSet<String>, TaskError> {
    let mut s: BTreeSet<String> =
        ctx.store.configs().await?.into_iter().map(|c| c.value.config.swarming).collect();
    let marks = ctx.store.marks(crate::tasks::inspect_swarming::STALE_BOTS).await?;
    s.extend(marks.into_iter().filter_map(|(k, _)| k.split_once('|').map(|(server, _)| server.to_owned())));
    Ok(s)
}

/// Projects of every Config, and of leak candidates (of removed Configs too).
async fn projects(ctx: &Ctx) -> Result<BTreeSet<String>, TaskError> {
    let mut p: BTreeSet<String> =
        ctx.store.configs().await?.into_iter().map(|c| c.value.config.attributes.project).collect();
    let marks = ctx.store.marks(crate::tasks::audit_instances::LEAKS).await?;
    p.extend(marks.into_iter().filter_map(|(k, _)| k.split_once('/').map(|(project, _)| project.to_owned())));
    Ok(p)
}
