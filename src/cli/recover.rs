//! `gce-backend recover`: the operator's commands that read and repair a deployment's Redis
//! directly, for when its API is down (every other command goes over the API): `recover status`
//! (Configs and Config files) and `recover queues …` (list, counts, task status by id or key,
//! pending/delayed/dead listings, retry and purge) and `recover migrate` (the store's move to
//! the key layout of a cluster). Output is JSON; an unknown queue, task or key
//! is a usage error.

use crate::adapters::backends::ConnectError;
use std::sync::Arc;

use gce_backend_jobs::tasks::QUEUES;
use gce_backend_queues::{DeadSelection, Engine, Policy, Queue, QueueSpec};

use crate::error::Usage;
use crate::out;
use crate::server::RedisArgs;

/// `gce-backend recover …`: what to read or repair.
#[derive(Debug, clap::Subcommand)]
pub enum RecoverCmd {
    /// Print the status of Configs (state, counts, last 20 errors, backoff) and the errors of
    /// Config files, as JSON, read from Redis.
    Status {
        /// Config prefixes (default: every Config).
        prefixes: Vec<String>,
        /// Count from the VM records now (reads each VM) instead of the last `count_vms` run.
        #[arg(long)]
        live: bool,
    },
    /// Inspect or repair the queues in Redis (`gce-backend recover queues list` names them).
    Queues {
        /// Queue name (every command but `list`).
        #[arg(long)]
        queue: Option<String>,
        /// What to do on it.
        #[command(subcommand)]
        op: QueueOp,
    },
    /// Move the store to the key layout that spreads over a Redis Cluster (each Config's keys
    /// under its own hash tag). Without --apply, only counts what would move. With it, writes
    /// wait for the few seconds the move takes; run it once every process runs this release
    /// (docs/operating.md, "Upgrading"). Safe to run again after an interruption.
    Migrate {
        /// Move (without it: a dry run that writes nothing).
        #[arg(long)]
        apply: bool,
    },
}

/// `gce-backend recover …`.
pub async fn recover(store: &RedisArgs, cmd: RecoverCmd) -> anyhow::Result<()> {
    match cmd {
        RecoverCmd::Status { prefixes, live } => {
            // Orphaned Configs carry their deletion time; the default grace is only for older ones.
            let grace = gce_backend_jobs::Timing::default().config_delete_grace.chrono();
            status(store, &prefixes, live, grace).await
        }
        RecoverCmd::Queues { queue, op } => queue_op(store, queue.as_deref(), op).await,
        RecoverCmd::Migrate { apply } => {
            let url = url(store, "recover migrate")?;
            let db = crate::adapters::backends::redis_store(url, &store.namespace)
                .await
                .map_err(ConnectError::once)?;
            let settle = crate::adapters::redis_store::SETTLE;
            out::json(&db.migrate(apply, settle).await?);
            Ok(())
        }
    }
}

/// The Redis URL, required here.
fn url<'a>(args: &'a RedisArgs, what: &str) -> Result<&'a str, Usage> {
    args.redis.as_deref().ok_or_else(|| {
        Usage(format!("{what} needs --redis (in-memory state lives in its own process: ask its API)"))
    })
}

/// `gce-backend recover status`: every Config (or `only`) with counts, errors, backoff and state, and
/// the Config files with errors.
async fn status(
    args: &RedisArgs,
    only: &[String],
    live: bool,
    grace: chrono::Duration,
) -> anyhow::Result<()> {
    let url = url(args, "recover status")?;
    let db =
        crate::adapters::backends::redis_store(url, &args.namespace).await.map_err(ConnectError::once)?;
    // Listed once: here when prefixes are named (to refuse unknown ones), else by the report.
    let known =
        if only.is_empty() { Vec::new() } else { gce_backend_jobs::fleet::status::prefixes(&db).await? };
    if let Some(p) = only.iter().find(|p| !known.contains(p)) {
        return Err(
            Usage(format!("no Config and no VMs with prefix {p:?} (known: {})", known.join(", "))).into()
        );
    }
    let report = gce_backend_jobs::fleet::status::report(
        &db,
        &db,
        only,
        gce_backend_jobs::ports::clock::Clock::now(&crate::adapters::SystemClock),
        grace,
        live,
        // Offline, without the settings: no tenant's budget is known here.
        &Default::default(),
    )
    .await?;
    out::json(&report);
    Ok(())
}

/// What to do on a queue.
#[derive(Debug, clap::Subcommand)]
pub enum QueueOp {
    /// Every queue of the pipeline with its counts.
    List,
    /// Counts (pending, delayed, running, dead) and counters.
    Counts,
    /// One task's status, by id or by key (the entity it is about, e.g. `linux-3`).
    Status {
        /// Task id.
        id: Option<String>,
        /// The key of its live (pending or running) task instead of an id.
        #[arg(long, conflicts_with = "id")]
        key: Option<String>,
    },
    /// Due tasks, in the order workers take them.
    Pending {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Skip this many.
        #[arg(long, default_value_t = 0)]
        offset: usize,
    },
    /// Tasks waiting for their time (pushed with a delay, or retrying), soonest first.
    Delayed {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Skip this many.
        #[arg(long, default_value_t = 0)]
        offset: usize,
    },
    /// Dead tasks, newest first.
    Dead {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Put dead tasks back as pending.
    RetryDead {
        /// One task id; without it, all dead tasks.
        id: Option<String>,
    },
    /// Drop every dead task.
    PurgeDead,
    /// Drop every pending and delayed task (running ones finish); the cron jobs push again
    /// what is still wanted.
    PurgePending,
}

fn queue(engine: &Arc<dyn Engine>, name: &str) -> Result<Queue, Usage> {
    if !QUEUES.contains(&name) {
        return Err(Usage(format!("no queue {name:?} (queues: {})", QUEUES.join(", "))));
    }
    let spec = QueueSpec::new(name, Policy::default())
        .and_then(|s| s.partitioned(gce_backend_jobs::work::partitions(name)))
        .map_err(|e| Usage(e.to_string()))?;
    Ok(Queue::new(engine.clone(), spec))
}

/// `gce-backend recover queues …`.
async fn queue_op(args: &RedisArgs, name: Option<&str>, op: QueueOp) -> anyhow::Result<()> {
    let url = url(args, "recover queues")?;
    let engine: Arc<dyn Engine> = Arc::new(
        crate::adapters::backends::redis_engine(url, &args.namespace).await.map_err(ConnectError::once)?,
    );
    if let QueueOp::List = op {
        let mut all = serde_json::Map::new();
        for n in QUEUES {
            all.insert((*n).to_owned(), serde_json::to_value(queue(&engine, n)?.counts().await?)?);
        }
        out::json(&all);
        return Ok(());
    }
    let name =
        name.ok_or_else(|| Usage("--queue NAME is required (see `gce-backend recover queues list`)".into()))?;
    let q = queue(&engine, name)?;
    let missing = |what: String| -> anyhow::Error { Usage(format!("{what} in queue {name}")).into() };
    match op {
        QueueOp::List => unreachable!("handled above"),
        QueueOp::Counts => out::json(&q.counts().await?),
        QueueOp::Status { id: Some(id), .. } => match q.status(&id).await? {
            Some(st) => out::json(&st),
            None => return Err(missing(format!("no task {id} (unknown, or trimmed after it finished)"))),
        },
        QueueOp::Status { key: Some(key), .. } => match q.status_by_key(&key).await? {
            Some(st) => out::json(&st),
            None => return Err(missing(format!("no pending or running task for key {key:?}"))),
        },
        QueueOp::Status { .. } => return Err(Usage("status needs a task id or --key KEY".into()).into()),
        QueueOp::Pending { limit, offset } => out::json(&q.pending(limit, offset).await?),
        QueueOp::Delayed { limit, offset } => out::json(&q.delayed(limit, offset).await?),
        QueueOp::Dead { limit } => out::json(&q.dead(limit).await?),
        QueueOp::RetryDead { id } => {
            let one = id.is_some();
            let which = id.clone().map_or(DeadSelection::All, DeadSelection::One);
            let n = q.retry_dead(which).await?;
            if one && n == 0 {
                return Err(missing(format!("no dead task {}", id.unwrap_or_default())));
            }
            out::json(&serde_json::json!({"retried": n}))
        }
        QueueOp::PurgeDead => out::json(&serde_json::json!({"purged": q.purge_dead().await?})),
        QueueOp::PurgePending => out::json(&serde_json::json!({"purged": q.purge_pending().await?})),
    };
    Ok(())
}
