//! The `/metrics` endpoint's collection (Prometheus text format), served by the API and by
//! `--metrics-listen`; the crates take their own measurements (their `metrics` modules), this
//! encodes them. It holds this process's own measurements (tasks run, lifecycle latencies,
//! outbound calls, cron runs, API requests) and, where the process serves the API, the shared
//! state read from the store when scraped (fleet counts per Config, queue depths and the
//! queues' counters), so a fleet of N processes reports the shared state once, not N times.
//! Labels name Configs, queues, methods and fixed words only, never a VM, hostname or task.
//! Every name is prefixed `gce_backend_` except the process's own resources (`process_*`, as
//! every Prometheus client names them); `gce_backend_build_info{version}` is 1.

mod process;
mod shared;

use std::sync::{Arc, Mutex};
use tokio::time::Instant;

use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gce_backend_jobs::Ctx;
use gce_backend_queues::metrics::{Histograms, Labels};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use shared::{Shared, SharedCollector};

/// The content type of the text format.
const TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn api_seconds() -> Histogram {
    // 1 ms to about 32 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// A process's metrics: its registry, the API's request measurements, and (with `shared`) the
/// state every process shares.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    ctx: Ctx,
    shared: Option<Arc<Mutex<Shared>>>,
    requests: Family<Labels, Counter>,
    request_seconds: Histograms,
    throttled: Family<Labels, Counter>,
}

impl Metrics {
    /// The metrics of a process over `ctx`; with `shared`, also the store's shared state.
    pub fn new(ctx: Ctx, shared: bool) -> Self {
        let mut root = Registry::default();
        root.register_collector(Box::new(process::ProcessCollector));
        let registry = root.sub_registry_with_prefix("gce_backend");
        let build = Family::<Labels, Gauge>::default();
        build.get_or_create(&vec![("version", env!("CARGO_PKG_VERSION").to_owned())]).set(1);
        registry.register("build_info", "1, labelled with this build's version", build);
        ctx.metrics.register(registry);
        let requests = Family::<Labels, Counter>::default();
        let request_seconds: Histograms = Family::new_with_constructor(api_seconds);
        registry.register("api_requests", "API requests by method and HTTP status", requests.clone());
        registry.register("api_request_seconds", "API request latency by method", request_seconds.clone());
        let throttled = Family::<Labels, Counter>::default();
        registry.register(
            "http_throttled",
            "Requests answered 429 by listener (api, metrics) and by the rate that refused them: token, address, health (checks per address), register (per address); and connections closed at once for their address's cap (by=connections)",
            throttled.clone(),
        );
        let shared = shared.then(|| {
            let s = Arc::new(Mutex::new(Shared::default()));
            registry.register_collector(Box::new(SharedCollector(s.clone())));
            s
        });
        Self { registry: root, ctx, shared, requests, request_seconds, throttled }
    }

    /// Reads the shared state (if this process reports it), then encodes everything.
    pub async fn render(&self) -> String {
        if let Some(shared) = &self.shared {
            let fresh = shared::read(&self.ctx).await;
            *shared.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Where the listeners count the requests they throttle.
    pub fn throttled(&self) -> Family<Labels, Counter> {
        self.throttled.clone()
    }

    /// Records one API request: `method` is the API method's name.
    pub fn request(&self, method: &str, status: u16, secs: f64) {
        let m = method.to_owned();
        self.requests.get_or_create(&vec![("method", m.clone()), ("status", status.to_string())]).inc();
        self.request_seconds.get_or_create(&vec![("method", m)]).observe(secs);
    }
}

/// `GET /metrics`.
pub async fn serve_metrics(State(m): State<Arc<Metrics>>) -> Response {
    ([(CONTENT_TYPE, TEXT)], m.render().await).into_response()
}

/// Middleware for one API method's route: counts its requests by status, with latency.
pub async fn measure(
    State((m, name)): State<(Arc<Metrics>, &'static str)>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let res = next.run(req).await;
    m.request(name, res.status().as_u16(), started.elapsed().as_secs_f64());
    res
}
