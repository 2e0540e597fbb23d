//! The wiring: the adapters on the `jobs` ports (the store, queues and rate-limit buckets on
//! Redis or in memory; Compute and Swarming, guarded and rate limited; identity keys; the Cloud
//! Billing Catalog; the clock)
//! put together into the context every handler, cron job and API method receives. A simulator
//! starts in this process when no endpoint is given.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;
use gce_backend_jobs::env::{Ports, Settings as EnvSettings};
use gce_backend_jobs::ports::rated::RatedCompute;
use gce_backend_jobs::providers::Providers;
use gce_backend_jobs::{Ctx, Env, Queues};

use super::options::{GoogleCredentials, RunOptions};
use crate::adapters::SystemClock;
use crate::adapters::billing::Billing;
use crate::adapters::gce::Gce;
use crate::adapters::google_auth::{Adc, CLOUD_PLATFORM, Tokens, USERINFO_EMAIL};
use crate::adapters::swarming::Swarming;
use crate::error::Usage;
use crate::settings::Settings;
use gce_backend_sim::{self as sim, SimConfig};

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

/// Compute's and Swarming's tokens (each its own scope) as `--google-credentials` says, if any.
#[allow(clippy::type_complexity)]
fn tokens(opts: &RunOptions) -> anyhow::Result<(Option<Arc<Tokens>>, Option<Arc<Tokens>>)> {
    let adc = match (opts.google_credentials, opts.real_gce) {
        (Some(GoogleCredentials::Anonymous), true) => {
            return Err(Usage(
                "--real-gce with --google-credentials anonymous: Compute Engine and Swarming refuse anonymous calls".into(),
            )
            .into());
        }
        (Some(c), _) => c == GoogleCredentials::Adc,
        (None, real) => real,
    };
    if !adc {
        return Ok((None, None));
    }
    let adc = Adc::discover().map_err(Usage)?;
    let open = |scope| adc.tokens(&[scope]).map(Arc::new).map_err(|e| anyhow::Error::from(Usage(e)));
    let (compute, swarming) = (open(CLOUD_PLATFORM)?, open(USERINFO_EMAIL)?);
    tracing::info!(source = adc.name(), "Google credentials: Application Default Credentials");
    Ok((Some(compute), Some(swarming)))
}

/// Builds the context (store, queues, adapters; a simulator if no endpoint is given) without
/// starting anything else.
pub async fn context(
    opts: &RunOptions,
    settings: &Settings,
) -> anyhow::Result<(Ctx, Option<(std::net::SocketAddr, sim::Sim)>)> {
    let (engine, store, buckets) =
        crate::adapters::backends::open(opts.store.redis.as_deref(), &opts.store.namespace).await?;
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
            gce_backend_jobs::config::check_endpoint(what, url).map_err(Usage)?;
        }
    }
    let (compute_tokens, swarming_tokens) = tokens(opts)?;
    // The Catalog at Google's with --real-gce, else at the simulator (which serves it beside
    // Compute); read with Compute's token (cloud-platform takes the Catalog too).
    let prices = match (&gce, opts.real_gce) {
        (Some(e), false) => Billing::simulator(e, compute_tokens.clone()),
        _ => Billing::new(crate::adapters::billing::GOOGLE, compute_tokens.clone()),
    }
    .map_err(anyhow::Error::msg)?;
    let compute = Gce::connect(gce.as_deref(), compute_tokens)
        .await
        .map_err(anyhow::Error::msg)?
        .within(std::time::Duration::from_secs(settings.isolation.compute_timeout.0));
    let trust = Arc::new(settings.trust().map_err(anyhow::Error::msg)?);
    let bots =
        Swarming::new(swarming.as_deref(), trust.clone(), swarming_tokens).map_err(anyhow::Error::msg)?;
    let iso = &settings.isolation;
    let metrics = gce_backend_jobs::metrics::Metrics::default();
    let compute = gce_backend_jobs::ports::guarded::GuardedCompute::new(Arc::new(compute), iso, &metrics);
    // Rate limits outside the guard: a call held back holds no slot of its project's.
    let compute =
        RatedCompute::new(Arc::new(compute), buckets.clone(), settings.rate_limits.clone(), &metrics);
    let bots = gce_backend_jobs::ports::guarded::GuardedBots::new(Arc::new(bots), iso, &metrics);
    let policies: HashMap<String, gce_backend_queues::Policy> = settings.queues.clone().into_iter().collect();
    let clock: Arc<dyn gce_backend_jobs::ports::clock::Clock> = Arc::new(SystemClock);
    let hook = gce_backend_jobs::tasks::dead_hook(store.clone(), clock.clone());
    let queues = Queues::new(engine, gce_backend_jobs::tasks::QUEUES, &policies)?
        .with_dead_hook(hook)
        .with_metrics(&metrics.queues);
    let ports = Ports {
        store,
        compute: Arc::new(compute),
        bots: Arc::new(bots),
        buckets,
        clock,
        keys: Arc::new(crate::adapters::keys::HttpKeys::new(&certs).map_err(anyhow::Error::msg)?),
        prices: Arc::new(prices),
    };
    let started = EnvSettings {
        timing: Arc::new(settings.timing.clone()),
        limits: Arc::new(settings.limits.clone()),
        trust,
        deployment: settings.deployment.clone(),
        configs_dir: opts.configs.clone(),
    };
    let env = Env {
        ports,
        settings: started,
        queues,
        catalog: Arc::new(gce_backend_jobs::catalog::Catalog::new()),
        metrics,
        episodes: Arc::default(),
    };
    let providers = Arc::new(Providers::new(&settings.providers).map_err(anyhow::Error::msg)?);
    let ctx = Ctx { env, providers };
    // Each provider once, before work starts (a failure is logged; its calls try again).
    ctx.providers.setup_all(&ctx).await;
    Ok((ctx, sim))
}

/// Says at start, loudly, which Swarming servers stored Configs name that the settings do not
/// list (an upgrade from before `[swarming] servers`, or a server dropped from the list): such a
/// Config's bots are not asked about and its VMs not made until the list names the server.
pub async fn warn_unlisted(ctx: &Ctx) {
    let Ok(configs) = ctx.ports.store.configs().await else { return };
    let unlisted: std::collections::BTreeSet<&str> = configs
        .iter()
        .map(|c| c.value.config.swarming.as_str())
        .filter(|s| ctx.settings.trust.server(s).is_err())
        .collect();
    if !unlisted.is_empty() {
        tracing::error!(servers = ?unlisted, "stored Configs name Swarming servers the settings do not list: none is called and those Configs' VMs are neither made nor looked after until [swarming] servers lists them");
    }
}
