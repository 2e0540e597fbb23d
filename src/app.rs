//! `gce-backend run`: the composition root. Builds the store and queues (Redis, or in memory),
//! the Compute and Swarming adapters (real endpoints, or an in-process simulator), the context,
//! and runs the workers and/or the cron scheduler with progress on the terminal.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use gce_backend_jobs::ports::rated::RatedCompute;
use gce_backend_jobs::providers::Providers;
use gce_backend_jobs::{Ctx, Env, Queues};

use crate::adapters::SystemClock;
use crate::adapters::gce::Gce;
use crate::adapters::swarming::Swarming;
use crate::settings::Settings;
use crate::sim::{self, SimConfig};
use crate::workers::{self, Identity};

/// Which parts a process runs (the service's, and the queue demo's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Everything: workers and what feeds them.
    All,
    /// Only the queue workers.
    Workers,
    /// Only what feeds the workers: the cron scheduler (the queue demo's producer).
    #[value(alias = "producer")]
    Cron,
    /// Only the operator's HTTP API.
    Api,
}

impl Role {
    fn workers(self) -> bool {
        matches!(self, Role::All | Role::Workers)
    }

    fn cron(self) -> bool {
        matches!(self, Role::All | Role::Cron)
    }

    fn api(self) -> bool {
        matches!(self, Role::All | Role::Api)
    }
}

/// Options of `gce-backend run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunOptions {
    /// Redis (queues and the datastore); without `--redis` everything runs in this process, in
    /// memory (one process only).
    #[command(flatten)]
    pub store: crate::ops::RedisArgs,
    /// What this process runs.
    #[arg(long, value_enum, default_value = "all")]
    pub role: Role,
    /// Directory of Config files (`*.yaml`, `*.yml`, `*.json`).
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
    /// --redis, the listen address in the embedded default.
    #[arg(long, env = "GCE_BACKEND_ROOT_URL")]
    pub root_url: Option<String>,
    /// The API's tokens: a TOML file of `[[token]]` entries (name, sha256, role, groups,
    /// expires); see `gce-backend token`. Read again when it changes and on SIGHUP. The embedded
    /// default makes an admin token when none is given.
    #[arg(long, env = "GCE_BACKEND_TOKENS_FILE")]
    pub tokens: Option<PathBuf>,
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
            tokens_toml: None,
            metrics_listen: None,
        }
    }
}

/// A running service.
pub struct App {
    /// Its context.
    pub ctx: Ctx,
    /// The simulator it started, if any.
    pub sim: Option<(std::net::SocketAddr, sim::Sim)>,
    /// Where the API listens and its root URL, if it serves one.
    pub api: Option<(std::net::SocketAddr, String)>,
    /// The admin token the embedded default made (no `--tokens`).
    pub demo_token: Option<String>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    stop: tokio::sync::watch::Sender<bool>,
    scheduler: Option<tokio_cron_scheduler::JobScheduler>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").field("sim", &self.sim.as_ref().map(|s| s.0)).finish()
    }
}

/// Simulator timings for the embedded demo: quick, with bots running short tasks.
pub fn demo_sim() -> SimConfig {
    SimConfig {
        op_ms: 300,
        provision_ms: 200,
        stage_ms: 200,
        bot_connect_ms: 300,
        bot_task_ms: 2000,
        bot_idle_ms: 500,
        ..SimConfig::default()
    }
}

/// Builds the context (store, queues, adapters; a simulator if no endpoint is given) without
/// starting anything else.
pub async fn context(
    opts: &RunOptions,
    settings: &Settings,
) -> anyhow::Result<(Ctx, Option<(std::net::SocketAddr, sim::Sim)>)> {
    let (engine, store, buckets) =
        crate::backends::open(opts.store.redis.as_deref(), &opts.store.namespace).await?;
    let mut sim = None;
    let (gce, swarming) = match (&opts.gce_endpoint, opts.real_gce) {
        (Some(e), _) => (
            Some(e.clone()),
            opts.swarming_endpoint.clone().or_else(|| Some(format!("{e}/swarming/{{host}}"))),
        ),
        (None, true) => (None, opts.swarming_endpoint.clone()),
        (None, false) => {
            let (addr, s) = sim::spawn(demo_sim()).await.context("starting the simulator")?;
            sim = Some((addr, s));
            let base = format!("http://{addr}");
            (Some(base.clone()), Some(format!("{base}/swarming/{{host}}")))
        }
    };
    let certs = match (&opts.certs_url, &gce) {
        (Some(url), _) => url.clone(),
        (None, Some(endpoint)) => format!("{}/oauth2/v3/certs", endpoint.trim_end_matches('/')),
        (None, None) => crate::adapters::keys::GOOGLE_CERTS.to_owned(),
    };
    for (what, url) in [("--certs-url", Some(&certs)), ("--gce-endpoint", gce.as_ref())] {
        if let Some(url) = url {
            gce_backend_jobs::config::check_endpoint(what, url).map_err(crate::ops::Usage)?;
        }
    }
    let compute = Gce::connect(gce.as_deref()).await.map_err(anyhow::Error::msg)?;
    let trust = Arc::new(settings.trust().map_err(anyhow::Error::msg)?);
    let bots = Swarming::new(swarming.as_deref(), trust.clone()).map_err(anyhow::Error::msg)?;
    let iso = &settings.isolation;
    let telemetry = gce_backend_jobs::telemetry::Telemetry::default();
    let compute = gce_backend_jobs::ports::guarded::GuardedCompute::new(Arc::new(compute), iso, &telemetry);
    // Rate limits outside the guard: a call held back holds no slot of its project's.
    let compute =
        RatedCompute::new(Arc::new(compute), buckets.clone(), settings.rate_limits.clone(), &telemetry);
    let bots = gce_backend_jobs::ports::guarded::GuardedBots::new(Arc::new(bots), iso, &telemetry);
    let policies: HashMap<String, gce_backend_queues::Policy> = settings.queues.clone().into_iter().collect();
    let clock: Arc<dyn gce_backend_jobs::ports::clock::Clock> = Arc::new(SystemClock);
    let hook = gce_backend_jobs::tasks::dead_hook(store.clone(), clock.clone());
    let queues = Queues::new(engine, gce_backend_jobs::tasks::QUEUES, &policies)?
        .with_dead_hook(hook)
        .with_metrics(&telemetry.queues);
    let env = Env {
        store,
        compute: Arc::new(compute),
        bots: Arc::new(bots),
        buckets,
        clock,
        queues,
        timing: Arc::new(settings.timing.clone()),
        limits: Arc::new(settings.limits.clone()),
        trust,
        catalog: Arc::new(gce_backend_jobs::catalog::Catalog::new()),
        keys: Arc::new(crate::adapters::keys::HttpKeys::new(&certs).map_err(anyhow::Error::msg)?),
        deployment: settings.deployment.clone(),
        configs_dir: opts.configs.clone(),
        telemetry,
        episodes: Arc::default(),
    };
    let providers = Arc::new(Providers::new(&settings.providers).map_err(anyhow::Error::msg)?);
    let ctx = Ctx { env, providers };
    // Each provider once, before work starts (a failure is logged; its calls try again).
    ctx.providers.setup_all(&ctx).await;
    Ok((ctx, sim))
}

/// Starts the service as `opts` and `settings` say.
pub async fn start(opts: &RunOptions, settings: Settings) -> anyhow::Result<App> {
    if opts.store.redis.is_none() && opts.role != Role::All {
        anyhow::bail!("--role {:?} needs --redis: in memory, nothing is shared between processes", opts.role);
    }
    if opts.role != Role::Workers && !opts.configs.is_dir() {
        let msg = format!(
            "configs directory {}: not found (run from the repository root, or pass --configs DIR)",
            opts.configs.display()
        );
        return Err(crate::ops::Usage(msg).into());
    }
    let (tokens, demo_token) = tokens(opts)?;
    let listener = match opts.role.api() {
        true => Some(listen(opts).await?),
        false => None,
    };
    let metrics_listener = match opts.api.metrics_listen {
        Some(addr) => Some(bind("--metrics-listen", addr, opts.api.allow_remote).await?),
        None => None,
    };
    let (ctx, sim) = context(opts, &settings).await?;
    warn_unlisted(&ctx).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    let mut api = None;
    let mut metrics = None;
    if let Some(listener) = listener {
        let addr = listener.local_addr()?;
        let root = opts
            .api
            .root_url
            .as_deref()
            .map_or_else(|| format!("http://{addr}"), |r| r.trim_end_matches('/').to_owned());
        api = Some((addr, root.clone()));
        let tokens = crate::api::auth::LiveTokens::from(tokens);
        if let Some(path) = &opts.api.tokens {
            let watch = crate::watch::tokens(tokens.clone(), path.clone(), stopped.clone());
            tasks.push(watch.context("watching the tokens file for SIGHUP")?);
        }
        let server = crate::api::Api::new(ctx.clone(), &root, tokens).with_http(&settings.http);
        metrics = Some(server.metrics.clone());
        let serve = crate::api::serve(server, listener, stopping(stopped.clone()));
        tasks.push(tokio::spawn(cut_off("the API", stopped.clone(), serve)));
    }
    if let Some(listener) = metrics_listener {
        tracing::info!("metrics on http://{}/metrics", listener.local_addr()?);
        // Without the API, only this process's own measurements: the shared state is the API's.
        let m = metrics.unwrap_or_else(|| Arc::new(crate::metrics::Metrics::new(ctx.clone(), false)));
        let (http, stop) = (settings.http.clone(), stopping(stopped.clone()));
        let serve = crate::api::serve_metrics_listener(m, ctx.clone(), listener, http, stop);
        tasks.push(tokio::spawn(cut_off("the metrics listener", stopped.clone(), serve)));
    }
    if opts.role.workers() {
        let monitor = workers::register_pipeline(
            workers::monitor(Duration::from_secs(30)),
            &ctx,
            &Identity::current(),
            settings.concurrency,
        );
        let mut stopped = stopped.clone();
        tasks.push(tokio::spawn(async move {
            let signal = async move {
                let _ = stopped.wait_for(|s| *s).await;
                Ok(())
            };
            if let Err(e) = monitor.run_with_signal(signal).await {
                tracing::error!(error = %e, "workers stopped");
            }
        }));
    }
    let mut scheduler = None;
    if opts.role.cron() {
        // Start from the files at once instead of waiting for the first tick.
        for job in ["import_configs", "expand_configs"] {
            if let Err(e) = gce_backend_jobs::cron::run(&ctx, job).await {
                tracing::warn!(job, error = %e, "first run failed; the cron will retry");
            }
        }
        scheduler = Some(crate::scheduler::start(ctx.clone(), &settings).await.map_err(anyhow::Error::msg)?);
        tasks.push(crate::watch::spawn(ctx.clone(), opts.configs.clone(), stopped.clone()));
    }
    if !opts.quiet {
        tasks.push(tokio::spawn(progress(ctx.clone(), stopped)));
    }
    Ok(App { ctx, sim, api, demo_token, tasks, stop, scheduler })
}

/// Resolves once the process is stopping.
async fn stopping(mut stopped: tokio::sync::watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// Runs a listener's `serve` (told to stop by [`stopping`]) to its end, but at most 5 s past
/// the process stopping: connections still open then are dropped.
async fn cut_off(
    what: &'static str,
    stopped: tokio::sync::watch::Receiver<bool>,
    serve: impl Future<Output = ()>,
) {
    let cutoff = async move {
        stopping(stopped).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    tokio::select! {
        () = serve => {}
        () = cutoff => tracing::warn!("{what}: open connections were dropped at shutdown"),
    }
}

/// Says at start, loudly, which Swarming servers stored Configs name that the settings do not
/// list (an upgrade from before `[swarming] servers`, or a server dropped from the list): such a
/// Config's bots are not asked about and its VMs not made until the list names the server.
async fn warn_unlisted(ctx: &Ctx) {
    let Ok(configs) = ctx.store.configs().await else { return };
    let unlisted: std::collections::BTreeSet<&str> = configs
        .iter()
        .map(|c| c.value.config.swarming.as_str())
        .filter(|s| ctx.trust.server(s).is_err())
        .collect();
    if !unlisted.is_empty() {
        tracing::error!(servers = ?unlisted, "stored Configs name Swarming servers the settings do not list: none is called and those Configs' VMs are neither made nor looked after until [swarming] servers lists them");
    }
}

/// The API's tokens: from `--tokens`, or a fresh admin token in the embedded default.
fn tokens(opts: &RunOptions) -> anyhow::Result<(crate::api::auth::Tokens, Option<String>)> {
    use crate::api::auth::{Caller, Role as ApiRole, Tokens, new_token};
    let given = match (&opts.api.tokens, &opts.api.tokens_toml) {
        (Some(path), _) => Some((
            std::fs::read_to_string(path)
                .map_err(|e| crate::ops::Usage(format!("--tokens {}: {e}", path.display())))?,
            path.display().to_string(),
        )),
        (None, Some(text)) => Some((text.clone(), "GCE_BACKEND_TOKENS".to_owned())),
        (None, None) => None,
    };
    match given {
        Some((text, origin)) => {
            let tokens = Tokens::parse(&text, &origin).map_err(crate::ops::Usage)?;
            if tokens.is_empty() && opts.role.api() {
                tracing::warn!(tokens = %origin, "no API token: every API call will answer 401");
            }
            Ok((tokens, None))
        }
        None if opts.store.redis.is_none() && opts.role.api() => {
            let (token, entry) = new_token("demo-admin", ApiRole::Admin, Vec::new());
            let caller = Caller { name: entry.name, role: ApiRole::Admin, groups: Vec::new() };
            Ok((Tokens::single(&token, caller), Some(token)))
        }
        None => {
            if opts.role.api() {
                tracing::warn!(
                    "no --tokens file: every API call will answer 401 (make them with `gce-backend token --name NAME --role ROLE`)"
                );
            }
            Ok((Tokens::default(), None))
        }
    }
}

/// Binds the API's address (loopback unless `--allow-remote`); with Redis, a root URL is required.
async fn listen(opts: &RunOptions) -> anyhow::Result<tokio::net::TcpListener> {
    let a = &opts.api;
    if opts.store.redis.is_some() && a.root_url.is_none() {
        let msg =
            "--root-url (or GCE_BACKEND_ROOT_URL) is required with --redis: the API states its URLs under it";
        return Err(crate::ops::Usage(msg.into()).into());
    }
    if let Some(root) = &a.root_url {
        gce_backend_jobs::config::check_endpoint("--root-url", root).map_err(crate::ops::Usage)?;
    }
    bind("--listen", a.listen, a.allow_remote).await
}

/// Binds `addr` for `flag`: loopback unless `allow_remote`.
async fn bind(
    flag: &str,
    addr: std::net::SocketAddr,
    allow_remote: bool,
) -> anyhow::Result<tokio::net::TcpListener> {
    if !addr.ip().is_loopback() && !allow_remote {
        let msg = format!("{flag} {addr}: not a loopback address; add --allow-remote to serve on it");
        return Err(crate::ops::Usage(msg).into());
    }
    tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        crate::ops::Usage(format!("{flag} {addr}: {e} (pick another address with {flag})")).into()
    })
}

impl App {
    /// Stops fetching, lets in-flight tasks finish, stops the scheduler.
    pub async fn stop(mut self) {
        if let Some(mut s) = self.scheduler.take() {
            let _ = s.shutdown().await;
        }
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Prints one line per Config whenever its counts change.
async fn progress(ctx: Ctx, mut stopped: tokio::sync::watch::Receiver<bool>) {
    let mut last: HashMap<String, String> = HashMap::new();
    loop {
        if let Ok(prefixes) = gce_backend_jobs::status::prefixes(&*ctx.store).await {
            for p in prefixes {
                let Ok((c, _)) = gce_backend_jobs::counts::tally(&*ctx.store, &p, ctx.now()).await else {
                    continue;
                };
                let errors = ctx.store.errors(&p).await.unwrap_or_default();
                let mut line = format!(
                    "{p}: configured={} created={} connected={}",
                    c.configured, c.created, c.connected
                );
                for (name, n) in [("draining", c.draining), ("dead", c.dead), ("unhealthy", c.unhealthy)] {
                    if n > 0 {
                        line.push_str(&format!(" {name}={n}"));
                    }
                }
                if let Some(e) = errors.first().filter(|e| e.resolved.is_none()) {
                    line.push_str(&format!(" last_error={} ({})", e.code, e.stage));
                }
                if last.get(&p) != Some(&line) {
                    crate::out::line(&line);
                    last.insert(p, line);
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}
