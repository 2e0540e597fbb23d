//! The operator's HTTP API (axum): Configs, VMs and queues under `ROOT/api/gce-backend/v1`,
//! the references and schemas that describe it (seed 002), health checks, `/metrics`, and the
//! servers (the shared hardened listener, with the rates of `listen.rs`): the API's, and
//! `--metrics-listen`'s.

pub mod auth;
mod configs;
pub mod error;
pub mod listen;
pub mod methods;
mod queues;
pub mod reference;
pub mod register;
mod status;
pub mod summary;
pub mod types;
mod ui;
mod vms;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use gce_backend_jobs::Ctx;
use serde::Serialize;
use serde::de::DeserializeOwned;

use auth::{LiveTokens, Needs};
use error::ApiError;
use reference::Urls;

use crate::metrics::Metrics;
use crate::settings::{CALL_TIMEOUT, Http};

/// Largest request body (bytes).
pub const MAX_BODY: usize = 1 << 20;

/// What handlers share.
#[derive(Clone)]
pub struct Api {
    /// The service's context (store, queues, clock, settings).
    pub ctx: Ctx,
    /// Where the API says it lives.
    pub urls: Urls,
    tokens: LiveTokens,
    /// `/metrics`: this process's, and the shared state read from the store.
    pub metrics: Arc<Metrics>,
    /// What its listener allows a client (`[http]`), and the rates it enforces.
    http: Http,
    throttle: Arc<listen::Throttle>,
    /// Registrations refused, logged by reason once a minute.
    refusals: Arc<summary::Summary>,
}

impl Api {
    /// The API over `ctx`, stating URLs under `root`, accepting `tokens` (a fixed set, or
    /// [`LiveTokens`] that a reload swaps).
    pub fn new(ctx: Ctx, root: &str, tokens: impl Into<LiveTokens>) -> Self {
        let metrics = Arc::new(Metrics::new(ctx.clone(), true));
        let tokens = tokens.into();
        let http = Http::default();
        let throttle = Arc::new(Self::throttle(&http, &ctx, &tokens, &metrics));
        let refusals = summary::Summary::new("registration refused");
        Api { ctx, urls: Urls::new(root), tokens, metrics, http, throttle, refusals }
    }

    /// The same API with the `[http]` settings `http` (the default ones otherwise).
    pub fn with_http(mut self, http: &Http) -> Self {
        self.throttle = Arc::new(Self::throttle(http, &self.ctx, &self.tokens, &self.metrics));
        self.http = http.clone();
        self
    }

    /// The API listener's rates: a bucket per valid token of `tokens`, on the context's clock.
    fn throttle(http: &Http, ctx: &Ctx, tokens: &LiveTokens, metrics: &Metrics) -> listen::Throttle {
        let register = format!("/api/{}/{}/register", reference::SERVICE, reference::VERSION);
        let (tokens, clock) = (Some(tokens.clone()), ctx.clock.clone());
        listen::Throttle::new("api", http, Some(register), tokens, clock, metrics.throttled())
    }
}

/// A handler's answer.
pub type Out<T> = Result<(StatusCode, Json<T>), ApiError>;

/// 200 with `v`.
pub fn ok<T>(v: T) -> Out<T> {
    Ok((StatusCode::OK, Json(v)))
}

/// 201 with `v`.
pub fn created<T>(v: T) -> Out<T> {
    Ok((StatusCode::CREATED, Json(v)))
}

/// A JSON body (an empty body reads as `{}`), its errors as 400 `InvalidInput`.
pub struct Input<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Input<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(e.status(), e.body_text()))?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { &bytes };
        serde_json::from_slice(text).map(Input).map_err(|e| ApiError::invalid(format!("body: {e}")))
    }
}

/// Query parameters, their errors as 400 `InvalidInput`.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let q = parts.uri.query().unwrap_or_default();
        serde_urlencoded::from_str(q).map(Params).map_err(|e| ApiError::invalid(format!("query: {e}")))
    }
}

fn doc(v: Option<serde_json::Value>) -> Response {
    match v {
        Some(v) => Json(v).into_response(),
        None => ApiError::new(StatusCode::NOT_FOUND, "no such document").into_response(),
    }
}

/// The whole router: API methods behind their role checks, public references and health.
pub fn router(api: Api) -> Router {
    let gate = |role| (api.tokens.clone(), api.ctx.clock.clone(), Needs(role));
    let metrics = api.metrics.clone();
    let methods = methods::routes(|m, r| {
        r.route_layer(axum::middleware::from_fn_with_state(gate(m.role), auth::require)).route_layer(
            axum::middleware::from_fn_with_state((metrics.clone(), m.name), crate::metrics::measure),
        )
    });
    let api_root = format!("/api/{}/{}", reference::SERVICE, reference::VERSION);
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
            &format!("/references/{}/{}/api.json", reference::SERVICE, reference::VERSION),
            get(|State(a): State<Api>| async move { Json(reference::api_reference(&a.urls)) }),
        )
        .route(
            "/schemas/base/v1/{file}",
            get(|State(a): State<Api>, Path(f): Path<String>| async move {
                doc(reference::base_schema(&a.urls, &f))
            }),
        )
        .route(
            &format!("/schemas/{}/{}/{{file}}", reference::SERVICE, reference::VERSION),
            get(|State(a): State<Api>, Path(f): Path<String>| async move {
                doc(reference::schema_doc(&a.urls, &f))
            }),
        )
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
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

/// What `/readyz` answers.
#[derive(Serialize)]
pub struct Ready {
    ready: bool,
    store: String,
}

/// 200 while the process serves.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"alive": true}))
}

/// 200 when the datastore answers, 503 otherwise.
async fn readyz(State(api): State<Api>) -> Out<Ready> {
    ready(&api.ctx).await
}

/// `/readyz` of any listener: 200 when the datastore answers within 5 s, 503 otherwise.
pub async fn ready(ctx: &Ctx) -> Out<Ready> {
    let probe =
        tokio::time::timeout(Duration::from_secs(5), gce_backend_jobs::operate::paused_all(ctx)).await;
    match probe {
        Ok(Ok(_)) => ok(Ready { ready: true, store: "ok".into() }),
        Ok(Err(e)) => Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("datastore: {e}"))),
        Err(_) => Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "datastore: no answer within 5s")),
    }
}

/// Serves `api` on `listener` within its `[http]` limits until `shutdown` resolves; then lets
/// the calls in flight finish (see [`gce_backend_sim::listener::serve`]).
pub async fn serve(
    api: Api,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (limits, refused) = (api.http.limits(), api.throttle.reporter());
    gce_backend_sim::listener::serve_reporting(listener, router(api), limits, refused, shutdown).await
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
        Arc::new(listen::Throttle::new("metrics", &http, None, None, ctx.clock.clone(), m.throttled()));
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
    gce_backend_sim::listener::serve_reporting(listener, app, http.limits(), refused, stop).await
}
