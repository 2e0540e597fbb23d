//! The process's listeners: the operator's API (with its `/metrics`) and `--metrics-listen`,
//! bound on loopback unless allowed otherwise, served until the service stops and cut off 5 s
//! later.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use gce_backend_jobs::Ctx;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::lifecycle::Life;
use super::options::RunOptions;
use crate::api::auth::{LiveTokens, Tokens};
use crate::error::Usage;
use crate::metrics::Metrics;
use crate::settings::Settings;

/// Binds the API's address (loopback unless `--allow-remote`); with Redis, a root URL is required.
pub async fn listen(opts: &RunOptions) -> anyhow::Result<TcpListener> {
    let a = &opts.api;
    if opts.store.redis.is_some() && a.root_url.is_none() {
        let msg = "--root-url (or GCE_BACKEND_PUBLIC_URL) is required with --redis: the API states its URLs under it";
        return Err(Usage(msg.into()).into());
    }
    if let Some(root) = &a.root_url {
        gce_backend_jobs::config::check_endpoint("--root-url", root).map_err(Usage)?;
    }
    bind("--listen", a.listen, a.allow_remote).await
}

/// Binds `addr` for `flag`: loopback unless `allow_remote`.
pub async fn bind(flag: &str, addr: std::net::SocketAddr, allow_remote: bool) -> anyhow::Result<TcpListener> {
    if !addr.ip().is_loopback() && !allow_remote {
        let msg = format!("{flag} {addr}: not a loopback address; add --allow-remote to serve on it");
        return Err(Usage(msg).into());
    }
    TcpListener::bind(addr)
        .await
        .map_err(|e| Usage(format!("{flag} {addr}: {e} (pick another address with {flag})")).into())
}

/// Serves the API on `listener` (and watches the tokens file, if one is given) until the
/// service stops. Returns its address and root URL, and its metrics (shared with
/// `--metrics-listen`).
pub fn serve_api(
    life: &mut Life,
    listener: TcpListener,
    opts: &RunOptions,
    settings: &Settings,
    ctx: &Ctx,
    tokens: Tokens,
) -> anyhow::Result<((std::net::SocketAddr, String), Arc<Metrics>)> {
    let addr = listener.local_addr()?;
    let root = opts
        .api
        .root_url
        .as_deref()
        .map_or_else(|| format!("http://{addr}"), |r| r.trim_end_matches('/').to_owned());
    let tokens = LiveTokens::from(tokens);
    if let Some(path) = &opts.api.tokens {
        let watch = super::watch::tokens(tokens.clone(), path.clone(), life.stopped());
        life.keep(watch.context("watching the tokens file for SIGHUP")?);
    }
    let server = crate::api::Api::new(ctx.clone(), &root, tokens).with_http(&settings.http);
    let metrics = server.metrics.clone();
    let serve = crate::api::serve(server, listener, stopping(life.stopped()));
    life.keep(tokio::spawn(cut_off("the API", life.stopped(), serve)));
    Ok(((addr, root), metrics))
}

/// Serves `/metrics` on `listener` until the service stops: the API's `metrics` when this
/// process serves the API, else only this process's own measurements (the shared state is the
/// API's).
pub fn serve_metrics(
    life: &mut Life,
    listener: TcpListener,
    metrics: Option<Arc<Metrics>>,
    settings: &Settings,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    tracing::info!("metrics on http://{}/metrics", listener.local_addr()?);
    let m = metrics.unwrap_or_else(|| Arc::new(Metrics::new(ctx.clone(), false)));
    let (http, stop) = (settings.http.clone(), stopping(life.stopped()));
    let serve = crate::api::serve_metrics_listener(m, ctx.clone(), listener, http, stop);
    life.keep(tokio::spawn(cut_off("the metrics listener", life.stopped(), serve)));
    Ok(())
}

/// Resolves once the process is stopping.
async fn stopping(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// Runs a listener's `serve` (told to stop by [`stopping`]) to its end, but at most 5 s past
/// the process stopping: connections still open then are dropped.
async fn cut_off(what: &'static str, stopped: watch::Receiver<bool>, serve: impl Future<Output = ()>) {
    let cutoff = async move {
        stopping(stopped).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    tokio::select! {
        () = serve => {}
        () = cutoff => tracing::warn!("{what}: open connections were dropped at shutdown"),
    }
}
