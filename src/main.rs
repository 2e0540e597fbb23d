//! The `gce-backend` binary: `run` (the service), `sim` (the simulator), `status` (Config
//! status), `queue` (operator commands on a queue in Redis) and `queue-demo`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use gce_backend::demo::{self, Role};
use gce_backend_queues::{DeadSelection, Engine, MemoryEngine, Policy, Queue, QueueSpec, RedisEngine};

#[derive(Debug, Parser)]
#[command(
    name = "gce-backend",
    version,
    about = "Keeps GCE VMs running Swarming bots in line with Config records"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Args)]
struct Store {
    /// Redis URL for queues (e.g. redis://127.0.0.1:6379/0). Without it everything runs in this
    /// process, in memory.
    #[arg(long, env = "GCE_BACKEND_REDIS")]
    redis: Option<String>,
    /// Deployment namespace: every Redis key of this deployment starts with `{<namespace>:`.
    #[arg(long, env = "GCE_BACKEND_NAMESPACE", default_value = "gce-backend")]
    namespace: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the service: import the Configs, reconcile instances and bots, print progress. With no
    /// --redis and no --gce-endpoint everything runs in this process, against a simulator.
    Run {
        #[command(flatten)]
        opts: gce_backend::app::RunOptions,
    },
    /// Run the queue demo: push demo tasks onto a queue and work them, printing progress.
    QueueDemo {
        #[command(flatten)]
        store: Store,
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
        /// Lease of a taken task, in milliseconds.
        #[arg(long, default_value_t = 30_000)]
        lease_ms: u64,
    },
    /// Run the Compute Engine + Swarming simulator (REST, pRPC and the `/sim/` admin API on one port).
    Sim {
        /// Address to listen on; loopback only unless --allow-remote.
        #[arg(long, default_value = "127.0.0.1:8787")]
        listen: std::net::SocketAddr,
        /// Serve on a non-loopback address (the simulator has no authentication).
        #[arg(long)]
        allow_remote: bool,
        #[command(flatten)]
        config: Box<gce_backend::sim::SimConfig>,
    },
    /// Print the status of Configs (counts, last 20 errors, current backoff) as JSON.
    Status {
        #[command(flatten)]
        store: Store,
        /// Config prefixes (default: every Config).
        prefixes: Vec<String>,
        /// Count from the VM records now (reads each VM) instead of the last `count_vms` run.
        #[arg(long)]
        live: bool,
    },
    /// Inspect or repair a queue in Redis.
    Queue {
        #[command(flatten)]
        store: Store,
        /// Queue name.
        #[arg(long)]
        queue: String,
        #[command(subcommand)]
        op: QueueOp,
    },
}

#[derive(Debug, Subcommand)]
enum QueueOp {
    /// Counts (pending, delayed, running, dead) and counters, as JSON.
    Counts,
    /// One task's status, as JSON.
    Status {
        /// Task id.
        id: String,
    },
    /// Dead tasks, newest first, as JSON.
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
}

async fn engine(store: &Store) -> anyhow::Result<Arc<dyn Engine>> {
    Ok(match &store.redis {
        Some(url) => Arc::new(
            RedisEngine::connect(url, &store.namespace)
                .await
                .with_context(|| format!("connecting to {url}"))?,
        ),
        None => Arc::new(MemoryEngine::new()),
    })
}

async fn main_() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { opts } => {
            // The shipped settings file is optional (defaults); one named explicitly must exist.
            let default = std::path::Path::new("config/service.toml");
            let path = (opts.settings != default || default.exists()).then_some(opts.settings.as_path());
            let settings = gce_backend::settings::Settings::load(path).map_err(anyhow::Error::msg)?;
            let app = gce_backend::app::start(&opts, settings).await?;
            if let Some((addr, _)) = &app.sim {
                println!("simulator on http://{addr} (Compute REST, Swarming pRPC, /sim/state)");
            }
            println!("running (configs in {}); Ctrl-C stops", opts.configs.display());
            gce_backend::workers::shutdown_signal().await?;
            println!("stopping: in-flight tasks finish, the rest stay queued");
            app.stop().await;
            Ok(())
        }
        Command::QueueDemo { store, role, tasks, task_ms, concurrency, lease_ms } => {
            anyhow::ensure!(concurrency > 0, "--concurrency must be at least 1");
            if store.redis.is_none() && role != Role::All {
                anyhow::bail!(
                    "--role workers/producer needs --redis: without it nothing is shared between processes"
                );
            }
            let engine = engine(&store).await?;
            let lease = Duration::from_millis(lease_ms);
            demo::run(engine, demo::Options { role, tasks, task_ms, concurrency, lease }).await
        }
        Command::Sim { listen, allow_remote, config } => {
            gce_backend::sim::check_listen(listen, allow_remote).map_err(anyhow::Error::msg)?;
            config.validate().map_err(anyhow::Error::msg)?;
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("listening on {listen}"))?;
            println!(
                "simulator on http://{} (seed {}, zones {})",
                listener.local_addr()?,
                config.seed,
                config.zones.join(",")
            );
            let sim = gce_backend::sim::Sim::new(*config);
            tokio::select! {
                r = gce_backend::sim::serve(listener, sim) => r.context("serving")?,
                r = gce_backend::workers::shutdown_signal() => r?,
            }
            Ok(())
        }
        Command::Status { store, prefixes, live } => {
            let url = store
                .redis
                .as_deref()
                .context("status needs --redis (in-memory state lives in its process)")?;
            let db = gce_backend::adapters::redis_store::RedisStore::connect(url, &store.namespace).await?;
            let prefixes = if prefixes.is_empty() {
                gce_backend_jobs::tasks::count_vms::prefixes(&db).await?
            } else {
                prefixes
            };
            let mut out = Vec::new();
            for p in prefixes {
                let now = chrono::Utc::now();
                let mut st = gce_backend_jobs::tasks::count_vms::status(&db, &p, now).await?;
                if live {
                    st.counts = gce_backend_jobs::tasks::count_vms::count_in(&db, &p, now).await?;
                }
                out.push(st);
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(())
        }
        Command::Queue { store, queue, op } => {
            anyhow::ensure!(
                store.redis.is_some(),
                "queue commands need --redis (in-memory queues live in their process)"
            );
            let q = Queue::new(engine(&store).await?, QueueSpec::new(&queue, Policy::default())?);
            let out = match op {
                QueueOp::Counts => serde_json::to_string_pretty(&q.counts().await?)?,
                QueueOp::Status { id } => match q.status(&id).await? {
                    Some(st) => serde_json::to_string_pretty(&st)?,
                    None => {
                        anyhow::bail!("no task {id} in queue {queue} (unknown, or trimmed after it finished)")
                    }
                },
                QueueOp::Dead { limit } => serde_json::to_string_pretty(&q.dead(limit).await?)?,
                QueueOp::RetryDead { id } => {
                    let which = id.map_or(DeadSelection::All, DeadSelection::One);
                    serde_json::json!({"retried": q.retry_dead(which).await?}).to_string()
                }
                QueueOp::PurgeDead => serde_json::json!({"purged": q.purge_dead().await?}).to_string(),
            };
            println!("{out}");
            Ok(())
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match main_().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gce-backend: {e:#}");
            ExitCode::FAILURE
        }
    }
}
