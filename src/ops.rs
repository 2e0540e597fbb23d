//! Operator commands on a deployment's Redis: `gce-backend status` (Configs and Config files)
//! and `gce-backend queue …` (list, counts, task status by id or key, pending/delayed/dead
//! listings, retry and purge). Output is JSON; an unknown queue, task or key is a usage error.

use std::sync::Arc;

use gce_backend_jobs::tasks::QUEUES;
use gce_backend_queues::{DeadSelection, Engine, Policy, Queue, QueueSpec};

use crate::out;

/// A mistake in the command line (exit code 2), as opposed to a failure (exit code 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// Where a deployment's data is.
#[derive(Debug, Clone, clap::Args)]
pub struct RedisArgs {
    /// Redis URL (e.g. redis://127.0.0.1:6379/0).
    #[arg(long, env = "GCE_BACKEND_REDIS")]
    pub redis: Option<String>,
    /// Deployment namespace: every Redis key of this deployment starts with `{<namespace>:`.
    #[arg(long, env = "GCE_BACKEND_NAMESPACE", default_value = "gce-backend")]
    pub namespace: String,
}

impl RedisArgs {
    fn url(&self, what: &str) -> Result<&str, Usage> {
        self.redis
            .as_deref()
            .ok_or_else(|| Usage(format!("{what} needs --redis (in-memory state lives in its own process)")))
    }
}

/// `gce-backend status`: every Config (or `only`) with counts, errors, backoff and state, and
/// the Config files with errors.
pub async fn status(
    args: &RedisArgs,
    only: &[String],
    live: bool,
    grace: chrono::Duration,
) -> anyhow::Result<()> {
    let url = args.url("status")?;
    let db = crate::backends::redis_store(url, &args.namespace)
        .await
        .map_err(|e| anyhow::anyhow!("Redis at {url} is not reachable: {e}"))?;
    // Listed once: here when prefixes are named (to refuse unknown ones), else by the report.
    let known = if only.is_empty() { Vec::new() } else { gce_backend_jobs::status::prefixes(&db).await? };
    if let Some(p) = only.iter().find(|p| !known.contains(p)) {
        return Err(
            Usage(format!("no Config and no VMs with prefix {p:?} (known: {})", known.join(", "))).into()
        );
    }
    let report = gce_backend_jobs::status::report(&db, &db, only, chrono::Utc::now(), grace, live).await?;
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
    if !QUEUES.contains(&name) && name != crate::demo::QUEUE {
        return Err(Usage(format!("no queue {name:?} (queues: {})", QUEUES.join(", "))));
    }
    let spec = QueueSpec::new(name, Policy::default()).map_err(|e| Usage(e.to_string()))?;
    Ok(Queue::new(engine.clone(), spec))
}

/// `gce-backend queue …`.
pub async fn queue_op(args: &RedisArgs, name: Option<&str>, op: QueueOp) -> anyhow::Result<()> {
    let url = args.url("queue commands")?;
    let engine: Arc<dyn Engine> = match crate::backends::redis_engine(url, &args.namespace).await {
        Ok(e) => Arc::new(e),
        Err(crate::backends::ConnectError::Retry(e)) => anyhow::bail!("Redis at {url} is not reachable: {e}"),
        Err(crate::backends::ConnectError::Fatal(e)) => return Err(e),
    };
    if let QueueOp::List = op {
        let mut all = serde_json::Map::new();
        for n in QUEUES {
            all.insert((*n).to_owned(), serde_json::to_value(queue(&engine, n)?.counts().await?)?);
        }
        out::json(&all);
        return Ok(());
    }
    let name = name.ok_or_else(|| Usage("--queue NAME is required (see `gce-backend queue list`)".into()))?;
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
