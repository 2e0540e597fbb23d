//! What `gce-backend run` is asked to run: the process's role, the store, the inputs, the
//! endpoints and the API's listener (clap arguments, so the command line flattens them, and plain
//! records, so tests build them), and the checks made before anything starts.

use std::path::PathBuf;

use crate::error::Usage;

/// Where a deployment's data is.
#[derive(Debug, Clone, clap::Args)]
pub struct RedisArgs {
    /// Redis URL: redis://, rediss:// (TLS), redis+sentinel://…/MASTER or redis+cluster://, with
    /// options ca_file=, password_file=, auth=iam, replicas= (docs/operating.md, "Redis in
    /// production").
    #[arg(long, env = "GCE_BACKEND_REDIS")]
    pub redis: Option<String>,
    /// Deployment namespace: every Redis key of this deployment starts with `{<namespace>:`.
    #[arg(long, env = "GCE_BACKEND_NAMESPACE", default_value = "gce-backend")]
    pub namespace: String,
}

/// Which parts a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Everything: workers and what feeds them.
    All,
    /// Only the queue workers.
    Workers,
    /// Only what feeds the workers: the cron scheduler.
    Cron,
    /// Only the operator's HTTP API.
    Api,
}

impl Role {
    /// Whether it runs the queue workers.
    pub fn workers(self) -> bool {
        matches!(self, Role::All | Role::Workers)
    }

    /// Whether it runs the cron scheduler (and watches the configs directory).
    pub fn cron(self) -> bool {
        matches!(self, Role::All | Role::Cron)
    }

    /// Whether it serves the operator's API.
    pub fn api(self) -> bool {
        matches!(self, Role::All | Role::Api)
    }
}

/// Options of `gce-backend run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunOptions {
    /// Redis (queues and the datastore); without `--redis` everything runs in this process, in
    /// memory (one process only).
    #[command(flatten)]
    pub store: RedisArgs,
    /// What this process runs.
    #[arg(long, value_enum, default_value = "all")]
    pub role: Role,
    /// Directory of Config files (`*.yaml`, `*.yml`, `*.json`; `*.cfg`: LUCI's `vms.cfg`).
    #[arg(long, default_value = "config/pools")]
    pub configs: PathBuf,
    /// Service settings file (schedules, timings, queue policies).
    #[arg(long, default_value = "config/service.toml")]
    pub settings: PathBuf,
    /// Compute Engine endpoint (e.g. a `gce-backend sim`). Without it, and without
    /// `--real-gce`, a simulator starts in this process.
    #[arg(long, env = "GCE_BACKEND_GCE_ENDPOINT")]
    pub gce_endpoint: Option<String>,
    /// Swarming endpoint template, `{host}` standing for the server's host (e.g.
    /// `http://127.0.0.1:8787/swarming/{host}`); defaults to the simulator's, or to
    /// `https://{host}` with `--real-gce`.
    #[arg(long, env = "GCE_BACKEND_SWARMING_ENDPOINT")]
    pub swarming_endpoint: Option<String>,
    /// Talk to the real Compute Engine and Swarming (Application Default Credentials).
    #[arg(long)]
    pub real_gce: bool,
    /// Google credentials on Compute and Swarming calls: `adc` (Application Default
    /// Credentials: a key file, else the metadata server, `GCE_METADATA_HOST` if set) or
    /// `anonymous`. Defaults to `adc` with `--real-gce`, else `anonymous` (a simulator takes
    /// anonymous calls unless it runs with `--require-auth`).
    #[arg(long, value_enum, env = "GCE_BACKEND_GOOGLE_CREDENTIALS")]
    pub google_credentials: Option<GoogleCredentials>,
    /// Where the keys that sign VMs' identity tokens are published (a JSON Web Key Set);
    /// defaults to the simulator's, or to Google's with `--real-gce`.
    #[arg(long, env = "GCE_BACKEND_CERTS_URL")]
    pub certs_url: Option<String>,
    /// No progress lines on the terminal.
    #[arg(long)]
    pub quiet: bool,
    /// The operator's API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Which Google credentials Compute and Swarming calls carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GoogleCredentials {
    /// Application Default Credentials.
    Adc,
    /// None.
    Anonymous,
}

/// Options of the operator's API.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiArgs {
    /// Where the operator's API listens (`--role all|api`); loopback only unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// Let the API listen on a non-loopback address.
    #[arg(long)]
    pub allow_remote: bool,
    /// The root URL the API states its URLs under (`ROOT/api/gce-backend/v1/…`); required with
    /// --redis, the listen address in the embedded default. Its variable is the server's own
    /// (`GCE_BACKEND_ROOT_URL` is the clients'), so a shell set up for a client never moves it.
    #[arg(long, env = "GCE_BACKEND_PUBLIC_URL")]
    pub root_url: Option<String>,
    /// The API's tokens: a TOML file of `[[token]]` entries (name, sha256, role, groups,
    /// expires); see `gce-backend token`. Read again when it changes and on SIGHUP. The embedded
    /// default makes an admin token when none is given.
    #[arg(long, env = "GCE_BACKEND_TOKENS_FILE")]
    pub tokens: Option<PathBuf>,
    /// When the --tokens file does not exist, make it on this first start with one admin token,
    /// and write that token beside it (`<file>.admin-token`, owner-only) for the operator to
    /// read once (docker compose's first `up`).
    #[arg(long, env = "GCE_BACKEND_TOKENS_INIT", requires = "tokens")]
    pub tokens_init: bool,
    /// The same TOML given inline (for secrets injected as environment variables; read once: a
    /// change needs a restart).
    #[arg(long, env = "GCE_BACKEND_TOKENS", hide_env_values = true, conflicts_with = "tokens")]
    pub tokens_toml: Option<String>,
    /// Also serve `/metrics` here: for `--role workers|cron`, which have no API listener (the API
    /// serves `ROOT/metrics`); loopback only unless --allow-remote.
    #[arg(long, env = "GCE_BACKEND_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

impl Default for ApiArgs {
    /// Loopback on a free port, root URL `http://localhost`, no tokens (for tests and embedding).
    fn default() -> Self {
        ApiArgs {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            allow_remote: false,
            root_url: Some("http://localhost".into()),
            tokens: None,
            tokens_init: false,
            tokens_toml: None,
            metrics_listen: None,
        }
    }
}

impl RunOptions {
    /// What is wrong with these options before anything starts: a role other than `all` in
    /// memory, a missing configs directory.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.store.redis.is_none() && self.role != Role::All {
            anyhow::bail!(
                "--role {:?} needs --redis: in memory, nothing is shared between processes",
                self.role
            );
        }
        if self.role != Role::Workers && !self.configs.is_dir() {
            return Err(Usage(format!(
                "configs directory {}: not found (run from the repository root, or pass --configs DIR)",
                self.configs.display()
            ))
            .into());
        }
        Ok(())
    }
}
