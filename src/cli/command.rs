//! The command line of the `gce-backend` binary: the servers (`run`: the service and its API;
//! `sim`: the simulator), which alone take the process flags (`--threads`, `--log-format`); the
//! operator's commands over the API (`status`, `spend`, `configs`, `vms`, `queues`, `api`);
//! `token`; and `recover`, the one command that reads Redis directly, for when the API is down.

use std::process::ExitCode;

use super::call::Target;
use super::operator::{self, ConfigsCmd, QueuesCmd, VmsCmd};
use super::recover::{self, RecoverCmd};
use crate::error::Usage;
use crate::out;
use crate::server::{RedisArgs, RunOptions};
use anyhow::Context;
use clap::{Parser, Subcommand};

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

/// The flags of a server process (`run`, `sim`).
#[derive(Debug, Clone, clap::Args)]
struct ProcessArgs {
    /// Log lines as text (for people) or JSON (one object per line, for log pipelines).
    #[arg(long, value_enum, default_value = "text", env = "GCE_BACKEND_LOG_FORMAT")]
    log_format: LogFormat,
    /// Threads that run tasks and calls: 1 runs everything on one thread (the least CPU per
    /// task: run one process per core), 0 one thread per core.
    #[arg(long, default_value_t = 0, env = "GCE_BACKEND_THREADS")]
    threads: usize,
}

impl Cli {
    /// The process flags: a server's own, the defaults for the other commands.
    fn process(&self) -> ProcessArgs {
        match &self.command {
            Command::Run { process, .. } | Command::Sim { process, .. } => process.clone(),
            _ => ProcessArgs { log_format: LogFormat::Text, threads: 0 },
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// `time LEVEL span: target: message key=value…`, coloured on a terminal.
    Text,
    /// One flat JSON object per line: time, severity (Cloud Logging's names), message, target,
    /// span, then the spans' and the event's fields.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the service: import the Configs, reconcile instances and bots, print progress. With no
    /// --redis and no --gce-endpoint everything runs in this process, against a simulator.
    Run {
        #[command(flatten)]
        opts: Box<RunOptions>,
        #[command(flatten)]
        process: ProcessArgs,
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
        config: Box<gce_backend_sim::SimConfig>,
        /// How long a client may take, and how many connections are served at once (in all,
        /// and from one client address: no cap by default).
        #[command(flatten)]
        limits: gce_backend_listener::Limits,
        #[command(flatten)]
        process: ProcessArgs,
    },
    /// Print a generated task trace for the simulator's `POST /sim/trace`, as JSON lines: a
    /// diurnal load (busy day, quiet night) with bursts, skewed durations; same seed, same trace.
    SimTrace {
        /// Seed of every draw.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Length in hours (from midnight).
        #[arg(long, default_value_t = 24.0)]
        hours: f64,
        /// Length of the trace's day in hours: less than 24 compresses the busy day and quiet
        /// night into that many hours (task durations and bursts unchanged).
        #[arg(long, default_value_t = 24.0)]
        day_hours: f64,
        /// Tasks, about.
        #[arg(long, default_value_t = 1000)]
        tasks: usize,
        /// Every task's dimensions: `key=value,...` (a value may hold `a|b`).
        #[arg(long, default_value = "pool=ci", value_parser = gce_backend_sim::trace::parse_dimensions)]
        dimensions: gce_backend_sim::dims::Dims,
    },
    /// Print the status of the Configs the token may read (state, counts, last 20 errors,
    /// backoff) and, for admins, the errors of Config files, as JSON (over the API).
    Status {
        #[command(flatten)]
        target: Target,
        /// Config prefixes (default: every Config).
        prefixes: Vec<String>,
        /// Count from the VM records now (reads each VM) instead of the last `count_vms` run.
        #[arg(long)]
        live: bool,
    },
    /// Showback of the tenants and Configs the token may read (over the API): VM-hours by
    /// billed state, the month's cost and the month before's, the cost per hour now, the share
    /// of each tenant's monthly budget used, and the price date.
    Spend {
        #[command(flatten)]
        target: Target,
        /// One tenant (an owner group of the settings' [tenants], or *); default: every one.
        #[arg(long)]
        tenant: Option<String>,
        /// The month, YYYY-MM (UTC); default: this month.
        #[arg(long, value_name = "YYYY-MM")]
        month: Option<String>,
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
    /// Configs over the API: list, get, apply -f FILE, delete, amount, pause, resume, plan,
    /// history; and convert FILE (LUCI vms.cfg to YAML and back, locally).
    Configs {
        #[command(flatten)]
        target: Target,
        #[command(subcommand)]
        cmd: ConfigsCmd,
    },
    /// VMs over the API: list PREFIX, get ID, recycle ID.
    Vms {
        #[command(flatten)]
        target: Target,
        #[command(subcommand)]
        cmd: VmsCmd,
    },
    /// Queues over the API: list, counts, pending, task, dead, retry, purge.
    Queues {
        #[command(flatten)]
        target: Target,
        #[command(subcommand)]
        cmd: QueuesCmd,
    },
    /// Call any API method by name (read from the deployment's API reference): NAME=VALUE
    /// arguments fill the route and query, --input FILE is the JSON body.
    Api {
        #[command(flatten)]
        target: Target,
        /// Method name (e.g. listConfigs).
        method: String,
        /// Route and query arguments, NAME=VALUE.
        args: Vec<String>,
        /// JSON body.
        #[arg(long)]
        input: Option<std::path::PathBuf>,
    },
    /// Recovery when the API is down: read and repair a deployment's Redis directly (`status`,
    /// `queues …`). Every other operator command goes over the API.
    Recover {
        #[command(flatten)]
        store: RedisArgs,
        #[command(subcommand)]
        cmd: RecoverCmd,
    },
}

/// `--expires`: an RFC 3339 time with an offset, still to come.
fn expiry(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    let at = chrono::DateTime::parse_from_rfc3339(s)
        .map_err(|e| format!("{e} (an RFC 3339 time with an offset, e.g. 2027-01-31T00:00:00Z)"))?
        .to_utc();
    if at <= gce_backend_jobs::ports::clock::Clock::now(&crate::adapters::SystemClock) {
        return Err("already past".into());
    }
    Ok(at)
}

async fn main_(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run { opts, .. } => crate::server::run(&opts).await,
        Command::SimTrace { seed, hours, day_hours, tasks, dimensions } => {
            let params = gce_backend_sim::trace::TraceParams { seed, hours, day_hours, tasks, dimensions };
            for t in gce_backend_sim::trace::generate(&params) {
                if !out::line(&t.json().to_string()) {
                    break;
                }
            }
            Ok(())
        }
        Command::Sim { listen, allow_remote, config, limits, .. } => {
            gce_backend_sim::check_listen(listen, allow_remote).map_err(anyhow::Error::msg)?;
            config.validate().map_err(anyhow::Error::msg)?;
            limits.validate().map_err(anyhow::Error::msg)?;
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("listening on {listen}"))?;
            let stop = crate::server::lifecycle::shutdown_signal()?;
            out::line(&format!(
                "simulator on http://{} (seed {}, zones {})",
                listener.local_addr()?,
                config.seed,
                config.zones.join(",")
            ));
            let sim = gce_backend_sim::Sim::new(*config);
            tokio::select! {
                () = gce_backend_sim::serve(listener, sim, limits) => {}
                () = stop => {}
            }
            Ok(())
        }
        Command::Status { target, prefixes, live } => operator::status(&target, &prefixes, live).await,
        Command::Spend { target, tenant, month } => {
            super::spend::spend(&target, tenant.as_deref(), month.as_deref()).await
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
        Command::Configs { target, cmd } => operator::configs(&target, cmd).await,
        Command::Vms { target, cmd } => operator::vms(&target, cmd).await,
        Command::Queues { target, cmd } => operator::queues(&target, cmd).await,
        Command::Api { target, method, args, input } => {
            operator::api(&target, &method, &args, input.as_deref()).await
        }
        Command::Recover { store, cmd } => recover::recover(&store, cmd).await,
    }
}

/// Log lines at the default level: this service's lifecycle (INFO), everyone's warnings.
const DEFAULT_LOG: &str = "warn,gce_backend=info,gce_backend_jobs=info,gce_backend_queues=info";

/// Parses the command line, runs the command, and says how it ended.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // A test build started with GCE_BACKEND_FUTURE_FIELDS=1 plays the next build (see
    // `jobs::unknown`); a release build ignores it.
    gce_backend_jobs::unknown::future_from_env();
    let runtime = match cli.process().threads {
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
    match cli.process().log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs
            .event_format(super::logs::FlatJson)
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .init(),
    }
    match main_(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gce-backend: {e:#}");
            if e.downcast_ref::<Usage>().is_some() { ExitCode::from(2) } else { ExitCode::FAILURE }
        }
    }
}
