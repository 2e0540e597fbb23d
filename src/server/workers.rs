//! Runs apalis workers over queues: one apalis `Monitor`, one worker per queue, and their stop,
//! bounded (see [`spawn`]): told to stop (SIGTERM, SIGINT), they take no new task, in-flight tasks
//! get a grace to finish (`stop_grace` in the settings, 20 s by default) and the tasks taken but
//! not started are released; past the
//! grace the runs still going are cut short and handed back to their queue for another worker,
//! never acknowledged as done.

use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::*;
use futures::future::BoxFuture;
use gce_backend_jobs::work::Next;
use gce_backend_queues::Queue;
use gce_backend_queues::backend::stop::{self, Holdings};
use gce_backend_queues::outcome::Ran;
use serde::de::DeserializeOwned;

/// A task handler: takes the decoded payload, returns how the run ended (done, or look again
/// later: see `gce_backend_queues::outcome::Ran`).
pub type Handler<Args> = Arc<dyn Fn(Args) -> BoxFuture<'static, Result<Ran, BoxDynError>> + Send + Sync>;

/// Who the workers of this process are.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Worker group recorded in each run: the host name.
    pub group: String,
    /// Distinguishes this process within the group.
    pub process: String,
}

impl Identity {
    /// This host and process.
    pub fn current() -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        Self { group: host, process: std::process::id().to_string() }
    }
}

/// Adds a worker for `queue` to `monitor`, running `handler` on up to `concurrency` tasks at once;
/// the tasks it holds are followed by `holdings` (handed back if its stop runs out of time).
///
/// The worker name is `<host>-<pid>-<queue>-<restarts>`, unique per process start; the queue
/// does not depend on names (leases are), so a restarted worker is never refused.
pub fn register<Args>(
    monitor: Monitor,
    queue: &Queue,
    who: &Identity,
    concurrency: usize,
    holdings: &Holdings,
    handler: Handler<Args>,
) -> Monitor
where
    Args: DeserializeOwned + Send + Sync + 'static,
{
    let queue = queue.clone();
    let who = who.clone();
    let holdings = holdings.clone();
    monitor.register(move |restarts| {
        let handler = handler.clone();
        WorkerBuilder::new(format!("{}-{}-{}-{restarts}", who.group, who.process, queue.spec().name))
            .backend(queue.backend::<Args>(&who.group).held_in(&holdings))
            .concurrency(concurrency)
            .catch_panic()
            .timeout(queue.spec().policy.timeout)
            .build(move |args: Args| handler(args))
    })
}

/// A monitor that gives in-flight tasks `grace` to finish once told to stop (then drops the
/// workers, their handlers with them: [`spawn`] hands back what they held), and restarts a worker
/// that ended with an error (our backend never ends one on Redis errors, so this guards against
/// the unexpected, bounded so it cannot spin forever).
pub fn monitor(grace: Duration) -> Monitor {
    Monitor::new().shutdown_timeout(grace).should_restart(|ctx, err| {
        tracing::error!(worker = ctx.name(), error = %err, "worker ended; restarting");
        ctx.restarts() < 100
    })
}

/// `d` plus up to a quarter more, at random.
fn jittered(d: Duration) -> Duration {
    use rand::Rng;
    let extra = rand::rng().random_range(0..=d.as_millis() as u64 / 4);
    d + Duration::from_millis(extra)
}

/// A handler's failure: logged once at WARN (the task's span adds queue, key and attempt),
/// counted on its Config's status, and mapped to the queue's outcome: permanent errors go to the
/// dead set at once (the cron re-derives the work if it is still wanted), the rest are retried.
async fn failed(
    ctx: &gce_backend_jobs::Ctx,
    queue: &str,
    key: &str,
    e: gce_backend_jobs::TaskError,
) -> BoxDynError {
    let class = e.class();
    tracing::warn!(class = ?class, error = %e, "task failed");
    if let Some(prefix) = gce_backend_jobs::work::config_of(queue, key) {
        let counted = ctx.ports.store.bump(&prefix, gce_backend_jobs::model::counters::TASK_FAILURES).await;
        if let Err(err) = counted {
            tracing::debug!(error = %err, "cannot count the failure on the Config's status");
        }
    }
    match class {
        gce_backend_jobs::Class::Permanent => gce_backend_queues::outcome::permanent(e),
        gce_backend_jobs::Class::Transient => Box::new(e),
    }
}

/// Adds one worker per pipeline queue to `monitor`, each running its `jobs::tasks` handler
/// (the queues and their handlers come from the one registry, `jobs::tasks::visit`).
pub fn register_pipeline(
    monitor: Monitor,
    ctx: &gce_backend_jobs::Ctx,
    who: &Identity,
    concurrency: usize,
    holdings: &Holdings,
) -> Monitor {
    struct Registrar<'a> {
        monitor: Option<Monitor>,
        ctx: &'a gce_backend_jobs::Ctx,
        who: &'a Identity,
        concurrency: usize,
        holdings: &'a Holdings,
    }
    impl gce_backend_jobs::tasks::Visitor for Registrar<'_> {
        fn queue<T: gce_backend_queues::Task>(&mut self, run: gce_backend_jobs::tasks::Run<T>) {
            use futures::FutureExt;
            let c = self.ctx.clone();
            let handler: Handler<T> = Arc::new(move |t: T| {
                let c = c.clone();
                async move {
                    let key = t.key();
                    match run(c.clone(), t).await {
                        Ok(Next::Done) => Ok(Ran::Done),
                        // The same task, pending again (a push during the run merges into it).
                        Ok(Next::After(d)) => Ok(Ran::Again(d)),
                        // A call held back (its project's rate limit, or the open breaker of
                        // its project or server): looked at again when it may go (spread a
                        // little, so waiting tasks do not come back at once); not a failure, and
                        // said at DEBUG only (the condition's own lines say it once).
                        Err(e) if let Some(d) = e.throttled() => {
                            tracing::debug!(error = %e, again_in = ?d, "task held back");
                            Ok(Ran::Again(jittered(d)))
                        }
                        Err(e) => Err(failed(&c, T::QUEUE, &key, e).await),
                    }
                }
                .boxed()
            });
            let queue = self.ctx.queues.get(T::QUEUE);
            let monitor = self.monitor.take().expect("set between calls");
            self.monitor = Some(register(monitor, queue, self.who, self.concurrency, self.holdings, handler));
        }
    }
    let mut r = Registrar { monitor: Some(monitor), ctx, who, concurrency, holdings };
    gce_backend_jobs::tasks::visit(&mut r);
    r.monitor.expect("set")
}

/// Runs the pipeline's workers (one per queue, `concurrency` tasks each) until `stopped` turns
/// true, then stops them within a bound:
///
/// 1. no worker starts a task any more;
/// 2. in-flight tasks get `grace` to finish, each acknowledged as its handler ended; once a
///    worker's in-flight tasks are done, the tasks it took but did not start are released to the
///    head of their queue (with those of a take that was on its way);
/// 3. past `grace`, the workers are dropped with their handlers, and every task they still hold
///    is handed back at once (a run cut short is kept as `handed-back` in its task's status, its
///    attempt not counted; the others released): another worker takes them at once, none is
///    acknowledged as done, none waits for its lease. Writing this takes at most
///    [`stop::HAND_BACK_LIMIT`] (2 s); what Redis does not take by then (or a take that was on
///    its way at that moment) comes back when its lease runs out.
///
/// So the task ends at most `grace` + [`stop::HAND_BACK_LIMIT`] after `stopped` turns true
/// (20 s + 2 s with the default settings, inside Kubernetes' default 30 s).
pub fn spawn(
    ctx: &gce_backend_jobs::Ctx,
    concurrency: usize,
    grace: Duration,
    stopped: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let holdings = Holdings::new();
    let monitor = register_pipeline(monitor(grace), ctx, &Identity::current(), concurrency, &holdings);
    let mut told = stopped;
    let signal = async move {
        let _ = told.wait_for(|s| *s).await;
        Ok(())
    };
    tokio::spawn(async move {
        if let Err(e) = monitor.run_with_signal(signal).await {
            tracing::error!(error = %e, "workers stopped");
        }
        // Past the grace the workers were dropped: what they still held goes back now (nothing,
        // when they finished in time).
        let h = holdings.hand_back(stop::HAND_BACK_LIMIT).await;
        if h.handed_back + h.released > 0 {
            tracing::info!(
                handed_back = h.handed_back,
                released = h.released,
                written = h.written,
                "workers stopped at the end of their grace"
            );
        } else {
            tracing::debug!("workers stopped");
        }
    })
}
