//! The operator's HTTP API (axum): Configs, VMs and queues under `ROOT/api/gce-backend/v1`,
//! the references and schemas that describe it (seed 002), health checks, `/metrics`, and the
//! servers (the shared hardened listener, with the rates of `listen.rs`): the API's, and
//! `--metrics-listen`'s.
//!
//! Its files are floors (each imports only from the lines above it; the crate's `lib.rs` lists
//! them): the records (`summary`, `error`, `urls`), tokens and rates (`auth`, `types`,
//! `listen`), what handlers share (`durable`: writes wait for the replicas; `state`: [`Api`];
//! `io`: [`Out`], [`Input`], [`Params`]; `health`), the handlers (`configs`, `queues`, `vms`, `register`, `series`, `status`, `spend`, `ui`), the method
//! table (`methods`) and what is made from it (`reference`); this file, on top, only builds the
//! router and serves it.

pub mod error;
pub mod summary;
pub mod urls;

pub mod auth;
pub mod listen;
pub mod types;

mod durable;
mod health;
mod io;
mod state;

mod configs;
mod queues;
pub mod register;
mod series;
mod spend;
mod status;
mod ui;
mod vms;

pub mod methods;
pub mod reference;

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use gce_backend_jobs::Ctx;

use auth::Needs;
use error::ApiError;
use urls::{SERVICE, VERSION};

pub use health::{Ready, healthz, ready};
pub use io::{Input, Out, Params, created, ok};
pub use state::Api;

use crate::metrics::Metrics;
use crate::settings::{CALL_TIMEOUT, Http};

/// Largest request body (bytes).
pub const MAX_BODY: usize = 1 << 20;

fn doc(v: Option<serde_json::Value>) -> Response {
    match v {
        Some(v) => Json(v).into_response(),
        None => ApiError::new(StatusCode::NOT_FOUND, "no such document").into_response(),
    }
}

/// The whole router: API methods behind their role checks, public references and health.
pub fn router(api: Api) -> Router {
    let gate = |role| (api.tokens.clone(), api.ctx.ports.clock.clone(), Needs(role));
    let metrics = api.metrics.clone();
    let store = api.ctx.ports.store.clone();
    let methods = methods::routes(|m, r| {
        let r = if m.writes() {
            r.route_layer(axum::middleware::from_fn_with_state(store.clone(), durable::replicated))
        } else {
            r
        };
        r.route_layer(axum::middleware::from_fn_with_state(gate(m.role), auth::require)).route_layer(
            axum::middleware::from_fn_with_state((metrics.clone(), m.name), crate::metrics::measure),
        )
    });
    let api_root = format!("/api/{SERVICE}/{VERSION}");
    Router::new()
        .nest(
            &api_root,
            methods.route(
                "/openapi.json",
                get(|State(a): State<Api>| async move { Json(reference::openapi(&a.urls)) }),
            ),
        )
        .route(
            "/references/manifest.json",
            get(|State(a): State<Api>| async move { Json(reference::manifest(&a.urls)) }),
        )
        .route(
            &format!("/references/{SERVICE}/{VERSION}/api.json"),
            get(|State(a): State<Api>| async move { Json(reference::api_reference(&a.urls)) }),
        )
        .route(
            "/schemas/base/v1/{file}",
            get(|State(a): State<Api>, Path(f): Path<String>| async move {
                doc(reference::base_schema(&a.urls, &f))
            }),
        )
        .route(
            &format!("/schemas/{SERVICE}/{VERSION}/{{file}}"),
            get(|State(a): State<Api>, Path(f): Path<String>| async move {
                doc(reference::schema_doc(&a.urls, &f))
            }),
        )
        .route("/healthz", get(healthz))
        .route("/readyz", get(health::readyz))
        .merge(ui::routes())
        // A metrics or admin token only (it names every Config, project and zone, and why
        // registrations were refused); `--metrics-listen` serves the same without one, on a port
        // meant for the scraper only.
        .route(
            "/metrics",
            get(|State(a): State<Api>| crate::metrics::serve_metrics(State(a.metrics)))
                .route_layer(axum::middleware::from_fn_with_state(gate(auth::Role::Metrics), auth::require)),
        )
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "no such route (see ROOT/references/manifest.json)")
        })
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(MAX_BODY))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            CALL_TIMEOUT,
        ))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(error::panicked))
        // Inside `errors`: a 429 has a request id; before everything else: it costs nothing more.
        .layer(axum::middleware::from_fn_with_state(api.throttle.clone(), listen::limit))
        .layer(axum::middleware::from_fn(error::errors))
        .with_state(api)
}

/// Serves `api` on `listener` within its `[http]` limits until `shutdown` resolves; then lets
/// the calls in flight finish (see [`gce_backend_listener::serve`]).
pub async fn serve(
    api: Api,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (limits, refused) = (api.http.limits(), api.throttle.reporter());
    gce_backend_listener::serve_reporting(listener, router(api), limits, refused, shutdown).await
}

/// Serves `/metrics`, `/healthz` and `/readyz` of `ctx` on `listener` (`--metrics-listen`, for
/// processes without the API) as `http` says, until `stop` resolves. No tokens: its rates are
/// per address only.
pub async fn serve_metrics_listener(
    m: Arc<Metrics>,
    ctx: Ctx,
    listener: tokio::net::TcpListener,
    http: Http,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let throttle =
        Arc::new(listen::Throttle::new("metrics", &http, None, None, ctx.ports.clock.clone(), m.throttled()));
    let app = Router::new()
        .route("/metrics", get(crate::metrics::serve_metrics))
        .route("/healthz", get(healthz))
        .route(
            "/readyz",
            get(move || {
                let ctx = ctx.clone();
                async move { ready(&ctx).await }
            }),
        )
        .with_state(m)
        .layer(axum::middleware::from_fn_with_state(throttle.clone(), listen::limit));
    let refused = throttle.reporter();
    gce_backend_listener::serve_reporting(listener, app, http.limits(), refused, stop).await
}
