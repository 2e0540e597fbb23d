//! `sample_series`: one sample a minute of every Config (VMs created, bots connected, the amount
//! it targets) and every queue (its retried and failed counters, tasks waiting), the last hour
//! kept in the Store for the dashboard's charts. The scheduler runs each tick once across every
//! process, and a sample replaces its minute's, so a tick run twice writes one. Pushes no task.

use crate::ctx::Ctx;
use crate::env::Ports;
use crate::error::TaskError;
use crate::model::{Sample, Series};
use crate::tasks::QUEUES;

/// Names of a Config's sample values.
pub mod config {
    /// VMs with an instance.
    pub const CREATED: &str = "created";
    /// VMs whose bot connected.
    pub const CONNECTED: &str = "connected";
    /// The amount targeted.
    pub const AMOUNT: &str = "amount";
}

/// Names of a queue's sample values.
pub mod queue {
    /// Failed runs scheduled again, ever (a counter).
    pub const RETRIED: &str = "retried";
    /// Tasks that went to the dead set, ever (a counter).
    pub const FAILED: &str = "failed";
    /// Tasks pending or delayed now.
    pub const WAITING: &str = "waiting";
}

/// Runs once: samples every Config that decodes and every queue.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    let now = ctx.now();
    for rec in store.configs().await? {
        let rec = rec.value;
        let prefix = &rec.config.prefix;
        let counts = crate::records::counts::of_config(&**store, prefix, rec.current_amount, now).await?;
        let values = [
            (config::CREATED, u64::from(counts.created)),
            (config::CONNECTED, u64::from(counts.connected)),
            (config::AMOUNT, u64::from(rec.amount_at(now))),
        ];
        store.put_sample(&Series::Config(prefix.clone()), &Sample::of(now, &values)).await?;
    }
    for name in QUEUES {
        let c = ctx.queues.get(name).counts().await?;
        let values =
            [(queue::RETRIED, c.retried), (queue::FAILED, c.failed), (queue::WAITING, c.pending + c.delayed)];
        let series = Series::Queue((*name).to_owned());
        store.put_sample(&series, &Sample::of(now, &values)).await?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests;
