//! The service (`gce-backend run`): its composition root. [`start`] reads like the process it
//! makes: check the options, take the tokens and bind the listeners (so a mistake stops it before
//! anything runs), wire the context, then start what the role asks for (API, `/metrics`,
//! workers, the cron scheduler and the configs directory watch, progress lines), each stopped
//! by the one [`lifecycle::Life`].
//!
//! Floors, bottom to top (no file imports one above it):
//! * [`options`]: what to run (role, store, inputs, endpoints, the API's listener).
//! * [`context`]: the wiring of adapters into the `jobs` context; [`tokens`]: the API's tokens.
//! * [`lifecycle`]: what stops with the service, the signals; [`progress`]: terminal lines.
//! * [`listeners`]: the API and metrics listeners; [`workers`]: apalis workers over the pipeline
//!   queues; [`scheduler`]: the cron; [`watch`]: the configs directory and the tokens file.
//! * this file: [`start`] and [`run`].

pub mod context;
pub mod lifecycle;
pub mod listeners;
pub mod options;
pub mod progress;
pub mod scheduler;
pub mod tokens;
pub mod watch;
pub mod workers;

pub use context::{context, demo_sim};
pub use lifecycle::App;
pub use options::{ApiArgs, RedisArgs, Role, RunOptions};

use crate::out;
use crate::settings::Settings;
use lifecycle::Life;

/// Starts the service as `opts` and `settings` say.
pub async fn start(opts: &RunOptions, settings: Settings) -> anyhow::Result<App> {
    opts.check()?;
    let (tokens, demo_token) = tokens::tokens(opts)?;
    let listener = match opts.role.api() {
        true => Some(listeners::listen(opts).await?),
        false => None,
    };
    let metrics_listener = match opts.api.metrics_listen {
        Some(addr) => Some(listeners::bind("--metrics-listen", addr, opts.api.allow_remote).await?),
        None => None,
    };
    let (ctx, sim) = context(opts, &settings).await?;
    context::warn_unlisted(&ctx).await;
    // Each change of a tenant's budget in the settings, in the audit trail (a failure is said).
    if let Err(e) = gce_backend_jobs::operate::budgets::record_changes(&ctx, &ctx.settings.trust).await {
        tracing::warn!(error = %e, "tenants' budgets could not be compared with the audit trail");
    }
    let mut life = Life::default();
    let (mut api, mut metrics) = (None, None);
    if let Some(listener) = listener {
        let (at, m) = listeners::serve_api(&mut life, listener, opts, &settings, &ctx, tokens)?;
        (api, metrics) = (Some(at), Some(m));
    }
    if let Some(listener) = metrics_listener {
        listeners::serve_metrics(&mut life, listener, metrics, &settings, &ctx)?;
    }
    if opts.role.workers() {
        let grace = std::time::Duration::from_secs(settings.stop_grace.0);
        life.keep(workers::spawn(&ctx, settings.concurrency, grace, life.stopped()));
    }
    if opts.role.cron() {
        life.scheduler(scheduler::begin(&ctx, &settings).await.map_err(anyhow::Error::msg)?);
        life.keep(watch::spawn(ctx.clone(), opts.configs.clone(), life.stopped()));
    }
    if !opts.quiet {
        life.keep(tokio::spawn(progress::progress(ctx.clone(), life.stopped())));
    }
    Ok(App { ctx, sim, api, demo_token, life })
}

/// `gce-backend run`: starts the service, says where it is, runs until SIGINT or SIGTERM, stops.
pub async fn run(opts: &RunOptions) -> anyhow::Result<()> {
    let settings = Settings::load(Some(&opts.settings)).map_err(crate::error::Usage)?;
    let app = start(opts, settings).await?;
    let stop = lifecycle::shutdown_signal()?;
    progress::announce(&app);
    out::line(&format!("running (configs in {}); Ctrl-C stops", opts.configs.display()));
    stop.await;
    out::line(match opts.store.redis {
        Some(_) => "stopping: in-flight tasks finish, the rest stay queued in Redis",
        None => "stopping: in-flight tasks finish; the in-memory records and queues end with this process",
    });
    app.stop().await;
    Ok(())
}
