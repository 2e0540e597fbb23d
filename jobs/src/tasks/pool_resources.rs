//! `pool_resources`: brings a Config's per-pool resources in line through its provider (seed
//! 000's `createResources` / `updateResources` / `removeResources`; Compute Engine: an instance
//! template per revision, `providers/gce_template.rs`).
//!
//! * Its revision's are made (`Provider::ensure_resources`): pushed by `expand_config` when a
//!   Config appears or changes, and by the `count_vms` cron until made.
//! * Those of other revisions go (`Provider::remove_resources`) once no VM of their revision is
//!   left (being made, up, or in a bulk in flight: its VM records say so); pushed by the
//!   `count_vms` cron while the Config holds any, so the VM records are read at most once a tick.
//! * Each step is idempotent; one that failed fails the task (retried with the queue's backoff),
//!   after both were tried; an operation still running is looked at again later.

use crate::env::Ports;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::work::{Next, PoolResources};
use crate::records::writes::revisions_of;

/// Handles one task.
pub async fn run(ctx: &Ctx, t: PoolResources) -> Result<Next, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    let Some(cur) = store.config(&t.prefix).await? else { return Ok(Next::Done) };
    let provider = ctx.providers.get(&ctx.env, &cur.value.config.provider).await?;
    let ensured = provider.ensure_resources(ctx, &cur).await;
    let mut next = Next::Done;
    let mut failed = None;
    if cur.value.has_old_resources() {
        let in_use = revisions_of(ctx, &t.prefix).await?;
        for revision in cur.value.unused(&in_use) {
            match provider.remove_resources(ctx, &t.prefix, &revision).await {
                Ok(n) => next = next.sooner(n),
                Err(e) => failed = failed.or(Some(e)),
            }
        }
    }
    let next = next.sooner(ensured?);
    match failed {
        Some(e) => Err(e),
        None => Ok(next),
    }
}

#[cfg(test)]
mod tests;
