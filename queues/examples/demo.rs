//! The queue demo: pushes demo tasks onto a `demo` queue and works them with apalis workers,
//! printing the queue's counts once a second. It uses only this crate's public API: in memory by
//! default (one process), or on a Redis given with `--redis` (then split across processes with
//! `--role push` and `--role work`, and watch a killed worker's tasks come back after the lease).
//!
//! ```text
//! cargo run -p gce-backend-queues --example demo
//! cargo run -p gce-backend-queues --example demo -- --redis redis://127.0.0.1:6379/0 --role work
//! ```

use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::*;
use clap::Parser;
use gce_backend_queues::outcome::Ran;
use gce_backend_queues::{Engine, MemoryEngine, Policy, Queue, QueueSpec, RedisEngine, When};
use serde::{Deserialize, Serialize};

/// Name of the demo queue.
const QUEUE: &str = "demo";

/// What a process of the demo does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Role {
    /// Push the tasks, work them, stop when the queue is empty.
    All,
    /// Push the tasks and stop.
    Push,
    /// Work tasks until SIGINT or SIGTERM (running ones finish, the rest stay queued).
    Work,
}

#[derive(Debug, Parser)]
#[command(about = "The queue demo: push demo tasks onto a queue and work them, printing progress")]
struct Args {
    /// Redis URL; without it the queue is in this process's memory (`--role all` only).
    #[arg(long)]
    redis: Option<String>,
    /// Every Redis key of the demo starts with `{<namespace>:`.
    #[arg(long, default_value = "queue-demo")]
    namespace: String,
    /// What this process does.
    #[arg(long, value_enum, default_value = "all")]
    role: Role,
    /// Demo tasks to push.
    #[arg(long, default_value_t = 500)]
    tasks: u64,
    /// Milliseconds of simulated work per task.
    #[arg(long, default_value_t = 20)]
    task_ms: u64,
    /// Tasks worked at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Lease of a taken task, in milliseconds (a killed worker's tasks come back after it).
    #[arg(long, default_value_t = 30_000)]
    lease_ms: u64,
}

/// Payload of a demo task: its number and how long it works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct DemoTask {
    /// Task number; the task key is `demo-<n>`.
    n: u64,
    /// Milliseconds of simulated work.
    ms: u64,
}

/// One demo task's run: sleeps its time.
async fn work(task: DemoTask) -> Result<Ran, BoxDynError> {
    tokio::time::sleep(Duration::from_millis(task.ms)).await;
    Ok(Ran::Done)
}

/// Resolves on SIGINT or SIGTERM.
async fn signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}

/// Resolves on a signal, or (with `until_done`) once every task has ended; prints the counts
/// once a second meanwhile.
async fn progress(queue: Queue, until_done: bool) -> std::io::Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let stop = signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            r = &mut stop => return r,
            _ = tick.tick() => {
                let Ok(c) = queue.counts().await else { continue };
                println!(
                    "{QUEUE}: pending={} delayed={} running={} done={} retried={} dead={}",
                    c.pending, c.delayed, c.running, c.done, c.retried, c.dead
                );
                if until_done && c.pending + c.delayed + c.running == 0 && c.done + c.dead > 0 {
                    return Ok(());
                }
            }
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxDynError> {
    let args = Args::parse();
    let engine: Arc<dyn Engine> = match &args.redis {
        Some(url) => Arc::new(RedisEngine::connect(url, &args.namespace).await?),
        None if args.role == Role::All => Arc::new(MemoryEngine::new()),
        None => return Err("--role push|work needs --redis: in memory, nothing is shared".into()),
    };
    let policy = Policy { lease: Duration::from_millis(args.lease_ms), ..Policy::default() };
    let queue = Queue::new(engine, QueueSpec::new(QUEUE, policy)?);
    if args.role != Role::Work {
        let tasks: Vec<(String, DemoTask)> =
            (0..args.tasks).map(|n| (format!("demo-{n}"), DemoTask { n, ms: args.task_ms })).collect();
        let outcomes = queue.push_many(tasks.iter().map(|(k, t)| (k.clone(), t)), When::Now).await?;
        let added = outcomes.iter().filter(|o| o.added()).count();
        println!("pushed {} demo tasks ({added} new, {} already queued)", tasks.len(), tasks.len() - added);
    }
    if args.role == Role::Push {
        return Ok(());
    }
    // Worker names are unique per process start: `<pid>-demo-<restarts>`.
    let pid = std::process::id();
    let (q, concurrency) = (queue.clone(), args.concurrency);
    let monitor = Monitor::new().shutdown_timeout(Duration::from_secs(30)).register(move |restarts| {
        WorkerBuilder::new(format!("demo-{pid}-{QUEUE}-{restarts}"))
            .backend(q.backend::<DemoTask>("demo"))
            .concurrency(concurrency)
            .build(work)
    });
    println!("worker demo-{pid} running on queue {QUEUE} (concurrency {concurrency})");
    monitor.run_with_signal(progress(queue.clone(), args.role == Role::All)).await?;
    let c = queue.counts().await?;
    println!("stopped: done={} dead={} pending={}", c.done, c.dead, c.pending + c.delayed);
    Ok(())
}
