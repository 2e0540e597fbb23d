//! The command line of the `gce-backend` binary: `run` (the service and its API), `sim` (the
//! simulator), the API's CLI (`configs`, `vms`, `queues`, `api`), `token`, `status` and `queue`
//! (read next to Redis) and `queue-demo`. It lives in the library, so its code is compiled once,
//! here; the binary only calls [`main`].

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::demo::{self, Role};
use crate::ops::{self, QueueOp, RedisArgs, Usage};
use crate::out;
use anyhow::Context;
use clap::{Parser, Subcommand};
use gce_backend_queues::{Engine, MemoryEngine, RedisEngine};

#[derive(Debug, Parser)]
#[command(
    name = "gce-backend",
    version,
    about = "Keeps GCE VMs running Swarming bots in line with Config records"
)]
struct Cli {
    /// Log lines as text (for people) or JSON (one object per line, for log pipelines).
    #[arg(long, value_enum, default_value = "text", global = true, env = "GCE_BACKEND_LOG_FORMAT")]
    log_format: LogFormat,
    /// Threads that run tasks and calls: 1 runs everything on one thread (the least CPU per
    /// task: run one process per core), 0 one thread per core.
    #[arg(long, default_value_t = 0, global = true, env = "GCE_BACKEND_THREADS")]
    threads: usize,
    #[command(subcommand)]
    command: Command,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// `time LEVEL span: target: message key=value…`, coloured on a terminal.
    Text,
    /// One JSON object per line: timestamp, level, target, fields (message and key/values), span.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the service: import the Configs, reconcile instances and bots, print progress. With no
    /// --redis and no --gce-endpoint everything runs in this process, against a simulator.
    Run {
        #[command(flatten)]
        opts: crate::app::RunOptions,
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
        config: Box<crate::sim::SimConfig>,
        /// How long a client may take, and how many connections are served at once (in all,
        /// and from one client address: no cap by default).
        #[command(flatten)]
        limits: crate::sim::listener::Limits,
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
    /// Make an API token: prints the token (give it to its holder; it is not kept) and the
    /// `[[token]]` entry to add to the tokens file (it holds only the token's SHA-256).
    Token {
        /// Who holds it (shown in logs and records).
        #[arg(long)]
        name: String,
        /// What it may do.
        #[arg(long, value_enum)]
        role: crate::api::auth::Role,
        /// A group it belongs to (matched against Configs' `owner`); repeat for more.
        #[arg(long = "group")]
        groups: Vec<String>,
        /// When it stops being accepted: an RFC 3339 time with an offset (e.g.
        /// 2027-01-31T00:00:00Z); never without.
        #[arg(long, value_parser = expiry)]
        expires: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// Configs over the API: list, get, apply -f FILE, delete, amount, pause, resume, plan.
    Configs {
        #[command(flatten)]
        target: crate::cli::Target,
        #[command(subcommand)]
        cmd: crate::cli::ConfigsCmd,
    },
    /// VMs over the API: list PREFIX, get ID, recycle ID.
    Vms {
        #[command(flatten)]
        target: crate::cli::Target,
        #[command(subcommand)]
        cmd: crate::cli::VmsCmd,
    },
    /// Queues over the API: list, dead, retry, purge.
    Queues {
        #[command(flatten)]
        target: crate::cli::Target,
        #[command(subcommand)]
        cmd: crate::cli::QueuesCmd,
    },
    /// Call any API method by name (read from the deployment's API reference): NAME=VALUE
    /// arguments fill the route and query, --input FILE is the JSON body.
    Api {
        #[command(flatten)]
        target: crate::cli::Target,
        /// Method name (e.g. listConfigs).
        method: String,
        /// Route and query arguments, NAME=VALUE.
        args: Vec<String>,
        /// JSON body.
        #[arg(long)]
        input: Option<std::path::PathBuf>,
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

/// `--expires`: an RFC 3339 time with an offset, still to come.
fn expiry(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    let at = chrono::DateTime::parse_from_rfc3339(s)
        .map_err(|e| format!("{e} (an RFC 3339 time with an offset, e.g. 2027-01-31T00:00:00Z)"))?
        .to_utc();
    if at <= chrono::Utc::now() {
        return Err("already past".into());
    }
    Ok(at)
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

async fn main_(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run { opts } => {
            let settings = crate::settings::Settings::load(Some(&opts.settings)).map_err(Usage)?;
            let app = crate::app::start(&opts, settings).await?;
            if let Some((addr, _)) = &app.sim {
                out::line(&format!("simulator on http://{addr} (Compute REST, Swarming pRPC, /sim/state)"));
            }
            if let Some((addr, root)) = &app.api {
                out::line(&format!(
                    "API on {root}/api/gce-backend/v1 (reference: {root}/references/manifest.json; dashboard: {root}/ui/; listening on {addr})"
                ));
            }
            if let (Some(token), Some((_, root))) = (&app.demo_token, &app.api) {
                out::line(&format!(
                    "admin token for this run: export GCE_BACKEND_ROOT_URL={root} GCE_BACKEND_TOKEN={token}"
                ));
            }
            out::line(&format!("running (configs in {}); Ctrl-C stops", opts.configs.display()));
            crate::workers::shutdown_signal().await?;
            out::line("stopping: in-flight tasks finish, the rest stay queued");
            app.stop().await;
            Ok(())
        }
        Command::QueueDemo { store, role, tasks, task_ms, concurrency, lease_ms } => {
            anyhow::ensure!(concurrency > 0, "--concurrency must be at least 1");
            anyhow::ensure!(role != Role::Api, "the queue demo has no API: --role all, workers or cron");
            if store.redis.is_none() && role != Role::All {
                anyhow::bail!(
                    "--role workers/producer needs --redis: without it nothing is shared between processes"
                );
            }
            let engine = engine(&store).await?;
            let lease = Duration::from_millis(lease_ms);
            demo::run(engine, demo::Options { role, tasks, task_ms, concurrency, lease }).await
        }
        Command::Sim { listen, allow_remote, config, limits } => {
            crate::sim::check_listen(listen, allow_remote).map_err(anyhow::Error::msg)?;
            config.validate().map_err(anyhow::Error::msg)?;
            limits.validate().map_err(anyhow::Error::msg)?;
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("listening on {listen}"))?;
            out::line(&format!(
                "simulator on http://{} (seed {}, zones {})",
                listener.local_addr()?,
                config.seed,
                config.zones.join(",")
            ));
            let sim = crate::sim::Sim::new(*config);
            tokio::select! {
                () = crate::sim::serve(listener, sim, limits) => {}
                r = crate::workers::shutdown_signal() => r?,
            }
            Ok(())
        }
        Command::Status { store, prefixes, live } => {
            // Orphaned Configs carry their deletion time; the default grace is only for older ones.
            let grace = gce_backend_jobs::Timing::default().config_delete_grace.chrono();
            ops::status(&store, &prefixes, live, grace).await
        }
        Command::Token { name, role, groups, expires } => {
            let (token, mut entry) = crate::api::auth::new_token(&name, role, groups);
            entry.expires = expires;
            let file = crate::api::auth::TokenFile { token: vec![entry] };
            out::line(&format!(
                "# token for {name} (give it to its holder; only its hash is kept):\n# {token}"
            ));
            out::line(&toml::to_string(&file).context("encoding the entry")?);
            Ok(())
        }
        Command::Configs { target, cmd } => crate::cli::configs(&target, cmd).await,
        Command::Vms { target, cmd } => crate::cli::vms(&target, cmd).await,
        Command::Queues { target, cmd } => crate::cli::queues(&target, cmd).await,
        Command::Api { target, method, args, input } => {
            crate::cli::api(&target, &method, &args, input.as_deref()).await
        }
        Command::Queue { store, queue, op } => ops::queue_op(&store, queue.as_deref(), op).await,
    }
}

/// Log lines at the default level: this service's lifecycle (INFO), everyone's warnings.
const DEFAULT_LOG: &str = "warn,gce_backend=info,gce_backend_jobs=info,gce_backend_queues=info";

/// Parses the command line, runs the command, and says how it ended.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match cli.threads {
        1 => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        0 => tokio::runtime::Builder::new_multi_thread().enable_all().build(),
        n => tokio::runtime::Builder::new_multi_thread().worker_threads(n).enable_all().build(),
    };
    match runtime {
        Ok(rt) => rt.block_on(main_async(cli)),
        Err(e) => {
            eprintln!("gce-backend: cannot start the runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn main_async(cli: Cli) -> ExitCode {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().with_current_span(true).with_span_list(false).init(),
    }
    match main_(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gce-backend: {e:#}");
            if e.downcast_ref::<Usage>().is_some() { ExitCode::from(2) } else { ExitCode::FAILURE }
        }
    }
}
