//! The queue demo (`gce-backend queue-demo`): pushes demo tasks onto the `demo` queue and runs
//! workers over them, printing progress.

use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::BoxDynError;
use futures::FutureExt;
use gce_backend_queues::{Engine, Policy, Queue, QueueSpec, When};
use serde::{Deserialize, Serialize};

pub use crate::app::Role;
use crate::workers::{self, Identity};

/// Name of the demo queue.
pub const QUEUE: &str = "demo";

/// Payload of a demo task: its number and how long it works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DemoTask {
    /// Task number; the task key is `demo-<n>`.
    pub n: u64,
    /// Milliseconds of simulated work.
    pub ms: u64,
}

/// Demo settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// What this process does.
    pub role: Role,
    /// Tasks to push.
    pub tasks: u64,
    /// Work per task.
    pub task_ms: u64,
    /// Tasks worked at once.
    pub concurrency: usize,
    /// Lease of a taken task.
    pub lease: Duration,
}

/// The demo queue on `engine`.
pub fn queue(engine: Arc<dyn Engine>, lease: Duration) -> Result<Queue, gce_backend_queues::QueueError> {
    let policy = Policy { lease, ..Policy::default() };
    Ok(Queue::new(engine, QueueSpec::new(QUEUE, policy)?))
}

/// Runs the demo; returns once the role's work is over.
pub async fn run(engine: Arc<dyn Engine>, opts: Options) -> anyhow::Result<()> {
    let queue = queue(engine, opts.lease)?;
    let who = Identity::current();
    if opts.role != Role::Workers {
        let tasks: Vec<(String, DemoTask)> =
            (0..opts.tasks).map(|n| (format!("demo-{n}"), DemoTask { n, ms: opts.task_ms })).collect();
        let outcomes = queue.push_many(tasks.iter().map(|(k, t)| (k.clone(), t)), When::Now).await?;
        let added = outcomes.iter().filter(|o| o.added()).count();
        crate::out::line(&format!(
            "pushed {} demo tasks ({added} new, {} already queued)",
            tasks.len(),
            tasks.len() - added
        ));
    }
    if opts.role == Role::Cron {
        return Ok(());
    }
    let handler: workers::Handler<DemoTask> = Arc::new(|task: DemoTask| {
        async move {
            tokio::time::sleep(Duration::from_millis(task.ms)).await;
            Ok::<_, BoxDynError>(gce_backend_queues::outcome::Ran::Done)
        }
        .boxed()
    });
    let monitor =
        workers::register(workers::monitor(Duration::from_secs(30)), &queue, &who, opts.concurrency, handler);
    crate::out::line(&format!(
        "worker {}-{} running on queue {QUEUE} (concurrency {})",
        who.group, who.process, opts.concurrency
    ));
    let progress = queue.clone();
    let until_done = opts.role == Role::All;
    let stop = async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let signal = workers::shutdown_signal();
        tokio::pin!(signal);
        loop {
            tokio::select! {
                r = &mut signal => return r,
                _ = tick.tick() => {
                    let Ok(c) = progress.counts().await else { continue };
                    crate::out::line(&format!(
                        "{QUEUE}: pending={} delayed={} running={} done={} retried={} dead={}",
                        c.pending, c.delayed, c.running, c.done, c.retried, c.dead
                    ));
                    if until_done && c.pending + c.delayed + c.running == 0 && c.done + c.dead > 0 {
                        return Ok(());
                    }
                }
            }
        }
    };
    monitor.run_with_signal(stop).await?;
    let c = queue.counts().await?;
    crate::out::line(&format!("stopped: done={} dead={} pending={}", c.done, c.dead, c.pending + c.delayed));
    Ok(())
}
