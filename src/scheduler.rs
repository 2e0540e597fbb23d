//! The cron scheduler: one tokio-cron-scheduler job per cron job. Each tick is claimed in the
//! store first (`cron:<job>:<tick>`), so it runs once across any number of processes sharing a
//! Redis; the fan-outs themselves are harmless when repeated.

use std::time::Duration;

use gce_backend_jobs::{Ctx, cron};
use tokio_cron_scheduler::{Job, JobScheduler};

use crate::settings::{Settings, schedule};

/// Cron jobs running in this process: a tick that finds its job still running from the last
/// one is skipped, so slow ticks never pile up.
static RUNNING: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<String>>> =
    std::sync::LazyLock::new(Default::default);

/// Removes a job from [`RUNNING`] when its tick ends, however it ends.
struct Running(String);

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.0);
    }
}

/// Runs `job` for the tick around now, unless another process already did, or this process is
/// still running its previous tick.
pub async fn tick(ctx: &Ctx, job: &str, period: u64) {
    let key = format!("{}:{job}", ctx.deployment);
    if !RUNNING.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone()) {
        tracing::warn!(job, "the previous tick of this job is still running: this one is skipped");
        return;
    }
    let _running = Running(key);
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

/// Starts the scheduler; it runs until shut down.
pub async fn start(ctx: Ctx, settings: &Settings) -> Result<JobScheduler, String> {
    let sched = JobScheduler::new().await.map_err(|e| format!("scheduler: {e}"))?;
    for (name, spec) in &settings.cron {
        let (expr, period) = schedule(spec)?;
        let (c, n) = (ctx.clone(), name.clone());
        let job = Job::new_async(expr.as_str(), move |_, _| {
            let (ctx, name) = (c.clone(), n.clone());
            Box::pin(async move { tick(&ctx, &name, period).await })
        })
        .map_err(|e| format!("cron.{name}: {e}"))?;
        sched.add(job).await.map_err(|e| format!("scheduler: {e}"))?;
    }
    sched.start().await.map_err(|e| format!("scheduler: {e}"))?;
    Ok(sched)
}
