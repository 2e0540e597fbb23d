//! The cron scheduler: one tokio-cron-scheduler job per cron job. Each tick is claimed in the
//! store first (`cron:<job>:<tick>`), so it runs once across any number of processes sharing a
//! Redis; the fan-outs themselves are harmless when repeated.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gce_backend_jobs::{Ctx, cron};
use tokio_cron_scheduler::{Job, JobScheduler};

use crate::settings::{Settings, schedule};

/// Runs `job` for the tick around now, unless another process already did.
pub async fn tick(ctx: &Ctx, job: &str, period: u64) {
    let now = ctx.now().timestamp_millis() as f64 / 1000.0;
    let tick = (now / period as f64).round() as i64 * period as i64;
    let ttl = Duration::from_secs((2 * period).max(60));
    match ctx.store.claim(&format!("cron:{job}:{tick}"), ttl).await {
        Ok(true) => match cron::run(ctx, job).await {
            Ok(n) => tracing::debug!(job, tick, added = n, "cron"),
            Err(e) => tracing::warn!(job, tick, error = %e, "cron job failed"),
        },
        Ok(false) => tracing::debug!(job, tick, "tick already run elsewhere"),
        Err(e) => tracing::warn!(job, error = %e, "cannot claim the tick"),
    }
}

/// Marks a job's tick over when dropped, however the tick ends.
struct Done(Arc<AtomicBool>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
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
        let running = Arc::new(AtomicBool::new(false));
        let job = Job::new_async(expr.as_str(), move |_, _| {
            let (ctx, name, running) = (c.clone(), n.clone(), running.clone());
            Box::pin(async move {
                if running.swap(true, Ordering::AcqRel) {
                    tracing::warn!(job = %name, "the previous tick of this job is still running: this one is skipped");
                    return;
                }
                let _done = Done(running);
                tick(&ctx, &name, period).await;
            })
        })
        .map_err(|e| format!("cron.{name}: {e}"))?;
        sched.add(job).await.map_err(|e| format!("scheduler: {e}"))?;
    }
    sched.start().await.map_err(|e| format!("scheduler: {e}"))?;
    Ok(sched)
}
