//! The `/metrics` endpoint's collection (Prometheus text format), served by the API and by
//! `--metrics-listen`; the crates take their own measurements (their `metrics` modules), this
//! encodes them. It holds this process's own measurements (tasks run, lifecycle latencies,
//! outbound calls, cron runs, API requests) and, where the process serves the API, the shared
//! state read from the store when scraped (fleet counts per Config, queue depths and the
//! queues' counters), so a fleet of N processes reports the shared state once, not N times.
//! Labels name Configs, queues, methods and fixed words only, never a VM, hostname or task.

use std::sync::{Arc, Mutex};
use tokio::time::Instant;

use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gce_backend_jobs::Ctx;
use gce_backend_jobs::model::ConfigStatus;
use gce_backend_queues::Counts;
use gce_backend_queues::metrics::{Histograms, Labels};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of the text format.
const TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn api_seconds() -> Histogram {
    // 1 ms to about 32 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The shared state as last read, encoded on each scrape.
#[derive(Debug, Default)]
struct Shared {
    configs: Vec<ConfigStatus>,
    rate_limits: Vec<gce_backend_jobs::ports::rated::Level>,
    queues: Vec<(String, Counts)>,
    paused_all: bool,
}

/// Encodes [`Shared`]; refreshed by [`Metrics::render`] just before.
#[derive(Debug, Default)]
struct SharedCollector(Arc<Mutex<Shared>>);

fn gauge(d: &mut DescriptorEncoder<'_>, name: &str, help: &str, rows: &[(Labels, i64)]) -> std::fmt::Result {
    let mut m = d.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        ConstGauge::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

impl Collector for SharedCollector {
    fn encode(&self, mut d: DescriptorEncoder<'_>) -> std::fmt::Result {
        let s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let l = |pairs: &[(&'static str, &str)]| -> Labels {
            pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
        };
        let mut vms = Vec::new();
        let mut paused = Vec::new();
        let mut backoff = Vec::new();
        let mut zone_backoff = Vec::new();
        let mut zone_vms = Vec::new();
        let mut breaker = Vec::new();
        let mut dead = Vec::new();
        for c in &s.configs {
            let n = &c.counts;
            for (state, v) in [
                ("configured", n.configured),
                ("created", n.created),
                ("running", n.running),
                ("connected", n.connected),
                ("draining", n.draining),
                ("unhealthy", n.unhealthy),
                ("bot_dead", n.dead),
            ] {
                vms.push((l(&[("config", &c.prefix), ("state", state)]), i64::from(v)));
            }
            paused.push((l(&[("config", &c.prefix)]), i64::from(c.pause_in_force.is_some())));
            backoff.push((l(&[("config", &c.prefix)]), i64::from(c.backoff.is_some())));
            breaker.push((l(&[("config", &c.prefix)]), i64::from(c.breaker.is_some())));
            for z in &c.zones {
                zone_backoff
                    .push((l(&[("config", &c.prefix), ("zone", &z.zone)]), i64::from(z.backoff.is_some())));
                for (state, v) in [("vms", z.vms), ("connected", z.connected), ("draining", z.draining)] {
                    zone_vms.push((
                        l(&[("config", &c.prefix), ("zone", &z.zone), ("state", state)]),
                        i64::from(v),
                    ));
                }
            }
            dead.push((l(&[("config", &c.prefix)]), c.dead_tasks));
        }
        gauge(&mut d, "fleet_vms", "VMs per Config by state", &vms)?;
        gauge(
            &mut d,
            "config_paused",
            "1 while a Config is paused (by itself or by the global pause)",
            &paused,
        )?;
        gauge(
            &mut d,
            "config_backoff",
            "1 while a Config's creations back off (quota, stockout, refusals)",
            &backoff,
        )?;
        gauge(
            &mut d,
            "config_breaker_open",
            "1 while a Config's circuit breaker is open (VMs failed in a row: only canaries are made)",
            &breaker,
        )?;
        gauge(
            &mut d,
            "zone_backoff",
            "1 while a zone of a multi-zone Config backs off (its new VMs go to the other zones)",
            &zone_backoff,
        )?;
        gauge(
            &mut d,
            "zone_vms",
            "VMs of a multi-zone Config per zone: vms, connected, draining",
            &zone_vms,
        )?;
        let mut m = d.encode_descriptor(
            "config_dead_tasks",
            "Tasks of a Config that went to a dead set, ever (retries and purges do not lower it)",
            None,
            MetricType::Counter,
        )?;
        for (labels, v) in &dead {
            ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
        }
        gauge(
            &mut d,
            "paused_all",
            "1 while every Config is paused",
            &[(Vec::new(), i64::from(s.paused_all))],
        )?;
        let mut saturated = Vec::new();
        let mut m = d.encode_descriptor(
            "rate_limit_waits",
            "Compute calls that found their project's bucket empty (they waited or were sent back), across every process",
            None,
            MetricType::Counter,
        )?;
        for b in &s.rate_limits {
            let labels = l(&[("project", &b.project), ("class", &b.class)]);
            ConstCounter::new(b.waits).encode(m.encode_family(&labels)?)?;
            saturated.push((labels, i64::from(b.saturated)));
        }
        let mut m = d.encode_descriptor(
            "rate_limit_rate",
            "Compute calls per second a project's bucket allows now (halved after rateLimitExceeded, growing back)",
            None,
            MetricType::Gauge,
        )?;
        for b in &s.rate_limits {
            let labels = l(&[("project", &b.project), ("class", &b.class)]);
            ConstGauge::new(b.rate).encode(m.encode_family(&labels)?)?;
        }
        gauge(
            &mut d,
            "rate_limit_saturated",
            "1 while calls found the bucket empty within the last minute",
            &saturated,
        )?;
        let mut depth = Vec::new();
        for (q, c) in &s.queues {
            for (state, v) in
                [("pending", c.pending), ("delayed", c.delayed), ("running", c.running), ("dead", c.dead)]
            {
                depth.push((l(&[("queue", q), ("state", state)]), v as i64));
            }
        }
        gauge(&mut d, "queue_tasks", "Tasks per queue by state, across every process", &depth)?;
        let mut m = d.encode_descriptor(
            "queue_events",
            "Queue events across every process: pushed, done, failed (to the dead set), retried, expired (leases)",
            None,
            MetricType::Counter,
        )?;
        for (q, c) in &s.queues {
            for (event, v) in [
                ("pushed", c.pushed),
                ("done", c.done),
                ("failed", c.failed),
                ("retried", c.retried),
                ("expired", c.expired),
            ] {
                ConstCounter::new(v).encode(m.encode_family(&l(&[("queue", q), ("event", event)]))?)?;
            }
        }
        Ok(())
    }
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
        let mut registry = Registry::with_prefix("gce_backend");
        ctx.metrics.register(&mut registry);
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
        Self { registry, ctx, shared, requests, request_seconds, throttled }
    }

    /// Reads the shared state (if this process reports it), then encodes everything.
    pub async fn render(&self) -> String {
        if let Some(shared) = &self.shared {
            let fresh = self.read_shared().await;
            *shared.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The shared state now; what cannot be read is left out (and logged), never fatal.
    async fn read_shared(&self) -> Shared {
        let ctx = &self.ctx;
        let grace = ctx.timing.config_delete_grace.chrono();
        // Live counts: the store's per-Config sums, O(1) per Config.
        let report =
            gce_backend_jobs::status::report(&*ctx.store, &*ctx.buckets, &[], ctx.now(), grace, true).await;
        let (configs, paused_all, rate_limits) = match report {
            Ok(r) => (r.configs, r.paused.is_some(), r.rate_limits),
            Err(e) => {
                tracing::warn!(error = %e, "metrics: cannot read the Configs' status");
                (Vec::new(), false, Vec::new())
            }
        };
        let mut queues = Vec::new();
        for name in gce_backend_jobs::tasks::QUEUES {
            match ctx.queues.get(name).counts().await {
                Ok(c) => queues.push(((*name).to_owned(), c)),
                Err(e) => tracing::warn!(queue = name, error = %e, "metrics: cannot read the queue's counts"),
            }
        }
        Shared { configs, rate_limits, queues, paused_all }
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
