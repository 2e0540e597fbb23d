//! The cron scheduler: one tokio-cron-scheduler job per cron job. Each tick is claimed in the
//! store first (`cron:<job>:<tick>`), so it runs once across any number of processes sharing a
//! Redis; the fan-outs themselves are harmless when repeated.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use gce_backend_jobs::{Ctx, cron};
use tokio_cron_scheduler::{Job, JobScheduler};

use crate::settings::{Settings, schedule};

/// Runs the jobs that start from the files (`import_configs`, `expand_configs`) once now instead
/// of waiting for their first tick, then starts the scheduler. Every job's measurements read zero
/// until its first run here.
pub async fn begin(ctx: &Ctx, settings: &Settings) -> Result<JobScheduler, String> {
    for job in cron::names() {
        ctx.metrics.declare_cron(job);
    }
    for job in ["import_configs", "expand_configs"] {
        if let Err(e) = cron::run(ctx, job).await {
            tracing::warn!(job, error = %e, "first run failed; the cron will retry");
        }
    }
    start(ctx.clone(), settings).await
}

/// Runs `job` for the tick around now, unless another process already did.
pub async fn tick(ctx: &Ctx, job: &str, period: u64) {
    let now = ctx.now().timestamp_millis() as f64 / 1000.0;
    let tick = (now / period as f64).round() as i64 * period as i64;
    let ttl = Duration::from_secs((2 * period).max(60));
    match ctx.ports.store.claim(&format!("cron:{job}:{tick}"), ttl).await {
        Ok(true) => match cron::run(ctx, job).await {
            Ok(n) => tracing::debug!(job, tick, added = n, "cron"),
            Err(e) => tracing::warn!(job, tick, error = %e, "cron job failed"),
        },
        Ok(false) => tracing::debug!(job, tick, "tick already run elsewhere"),
        Err(e) => tracing::warn!(job, error = %e, "cannot claim the tick"),
    }
}

/// A job's tick in this scheduler: whether one runs, and the ticks skipped meanwhile.
#[derive(Default)]
struct Running {
    on: AtomicBool,
    skipped: AtomicU32,
}

impl Running {
    /// A tick is due: false (and counted) while the previous one still runs. The first tick a
    /// slow run makes skip is a WARN, the next ones DEBUG: the fact is said once.
    fn start(&self, job: &str) -> bool {
        if !self.on.swap(true, Ordering::AcqRel) {
            return true;
        }
        match self.skipped.fetch_add(1, Ordering::AcqRel) {
            0 => tracing::warn!(job, "the previous tick of this job is still running: this one is skipped"),
            _ => tracing::debug!(job, "the previous tick of this job is still running: this one is skipped"),
        }
        false
    }
}

/// Marks a job's tick over when dropped, however the tick ends (saying how many ticks it made
/// skip, if any).
struct Done(Arc<Running>, String);

impl Drop for Done {
    fn drop(&mut self) {
        let skipped = self.0.skipped.swap(0, Ordering::AcqRel);
        if skipped > 0 {
            tracing::info!(job = %self.1, skipped, "the slow tick of this job ended; the next ones run again");
        }
        self.0.on.store(false, Ordering::Release);
    }
}

/// Starts the scheduler; it runs until shut down.
pub async fn start(ctx: Ctx, settings: &Settings) -> Result<JobScheduler, String> {
    let sched = JobScheduler::new().await.map_err(|e| format!("scheduler: {e}"))?;
    for (name, spec) in &settings.cron {
        let (expr, period) = schedule(spec)?;
        let (c, n) = (ctx.clone(), name.clone());
        // One tick of a job at a time in this scheduler: a slow tick makes the next ones skip
        // instead of piling up.
        let running = Arc::new(Running::default());
        let job = Job::new_async(expr.as_str(), move |_, _| {
            let (ctx, name, running) = (c.clone(), n.clone(), running.clone());
            Box::pin(async move {
                if !running.start(&name) {
                    return;
                }
                let _done = Done(running, name.clone());
                tick(&ctx, &name, period).await;
            })
        })
        .map_err(|e| format!("cron.{name}: {e}"))?;
        sched.add(job).await.map_err(|e| format!("scheduler: {e}"))?;
    }
    sched.start().await.map_err(|e| format!("scheduler: {e}"))?;
    Ok(sched)
}
