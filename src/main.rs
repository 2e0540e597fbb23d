//! The `gce-backend` binary: `run` (the service), `sim` (the simulator), `status` (Config
//! status), `queue` (operator commands on a queue in Redis) and `queue-demo`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use gce_backend::demo::{self, Role};
use gce_backend::ops::{self, QueueOp, RedisArgs, Usage};
use gce_backend::out;
use gce_backend_queues::{Engine, MemoryEngine, RedisEngine};

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
        store: RedisArgs,
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
    /// Print the status of Configs (state, counts, last 20 errors, backoff) and the errors of
    /// Config files, as JSON.
    Status {
        #[command(flatten)]
        store: RedisArgs,
        /// Config prefixes (default: every Config).
        prefixes: Vec<String>,
        /// Count from the VM records now (reads each VM) instead of the last `count_vms` run.
        #[arg(long)]
        live: bool,
    },
    /// Inspect or repair the queues in Redis (`gce-backend queue list` names them).
    Queue {
        #[command(flatten)]
        store: RedisArgs,
        /// Queue name (every command but `list`).
        #[arg(long)]
        queue: Option<String>,
        #[command(subcommand)]
        op: QueueOp,
    },
}

async fn engine(store: &RedisArgs) -> anyhow::Result<Arc<dyn Engine>> {
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
            let settings = gce_backend::settings::Settings::load(Some(&opts.settings)).map_err(Usage)?;
            let app = gce_backend::app::start(&opts, settings).await?;
            if let Some((addr, _)) = &app.sim {
                out::line(&format!("simulator on http://{addr} (Compute REST, Swarming pRPC, /sim/state)"));
            }
            out::line(&format!("running (configs in {}); Ctrl-C stops", opts.configs.display()));
            gce_backend::workers::shutdown_signal().await?;
            out::line("stopping: in-flight tasks finish, the rest stay queued");
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
            out::line(&format!(
                "simulator on http://{} (seed {}, zones {})",
                listener.local_addr()?,
                config.seed,
                config.zones.join(",")
            ));
            let sim = gce_backend::sim::Sim::new(*config);
            tokio::select! {
                r = gce_backend::sim::serve(listener, sim) => r.context("serving")?,
                r = gce_backend::workers::shutdown_signal() => r?,
            }
            Ok(())
        }
        Command::Status { store, prefixes, live } => {
            // Orphaned Configs carry their deletion time; the default grace is only for older ones.
            let grace = gce_backend_jobs::Timing::default().config_delete_grace.chrono();
            ops::status(&store, &prefixes, live, grace).await
        }
        Command::Queue { store, queue, op } => ops::queue_op(&store, queue.as_deref(), op).await,
    }
}

/// Log lines at the default level: this service's lifecycle (INFO), everyone's warnings.
const DEFAULT_LOG: &str = "warn,gce_backend=info,gce_backend_jobs=info,gce_backend_queues=info";

#[tokio::main]
async fn main() -> ExitCode {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    match main_().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gce-backend: {e:#}");
            if e.downcast_ref::<Usage>().is_some() { ExitCode::from(2) } else { ExitCode::FAILURE }
        }
    }
}
