//! Service settings (`config/service.toml`): the deployment name, cron schedules, timings,
//! queue policies and what the listeners allow a client. Every key is optional (a cron job left
//! out keeps the default 60 s); unknown keys are errors.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use gce_backend_jobs::config::{Secs, SwarmingServers, Tenant, Trust};
use gce_backend_jobs::ports::buckets::Rate;
use gce_backend_jobs::ports::guard::Isolation;
use gce_backend_jobs::{Limits, Timing};
use gce_backend_queues::Policy;
use serde::Deserialize;

/// The settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Value of the `gce-backend` label on our instances (only instances with it are audited).
    pub deployment: String,
    /// Schedule per cron job: `<N>s` or `<N>m` (N divides 60), `1h`, or a 6-field cron expression.
    pub cron: BTreeMap<String, String>,
    /// Timings of the reconcile logic.
    pub timing: Timing,
    /// Guard rails (largest amount, expansion batches).
    pub limits: Limits,
    /// Isolation of slow or broken Swarming servers and Compute projects.
    pub isolation: Isolation,
    /// Compute calls per second per project and class, shared by every process (`[rate_limits]`).
    pub rate_limits: gce_backend_jobs::ports::rated::RateLimits,
    /// Policy per queue (durations like `30s`, or milliseconds).
    pub queues: BTreeMap<String, Policy>,
    /// Tasks worked at once per queue and process. No handler waits on Compute (operations are
    /// looked at again later), so a slot is held for a few round trips: 64 keeps a process
    /// busy; the calls in flight to one project or server are bounded by `[isolation]`.
    pub concurrency: usize,
    /// How long a process's in-flight tasks get to finish once it is told to stop (SIGTERM,
    /// SIGINT); past it the runs still going are handed back to their queue for another worker
    /// (never acknowledged as done) and the process exits, at most 2 s later. Keep it below the
    /// orchestrator's own grace (Kubernetes `terminationGracePeriodSeconds`, 30 s by default).
    /// At most 10 minutes.
    pub stop_grace: Secs,
    /// Where machines come from: `[providers.<id>]` with its `type` (none declared: one
    /// Compute Engine provider, `gce`). A Config names its provider (default: the one of type
    /// `gce`).
    pub providers: BTreeMap<String, gce_backend_jobs::config::providers::Declared>,
    /// What every listener (the API's, `--metrics-listen`) allows a client (`[http]`):
    /// timeouts, connection caps, request rates per token and per address.
    pub http: Http,
    /// The Swarming servers Configs may name (`[swarming] servers`); no other is ever called.
    pub swarming: SwarmingServers,
    /// What each owner group's Configs may use (`[tenants.<group>]`: prefixes, projects,
    /// service accounts, max_vms); `[tenants."*"]` is the tenant of Configs whose groups have
    /// none. Default: one open tenant.
    pub tenants: BTreeMap<String, Tenant>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            deployment: "gce-backend".into(),
            cron: gce_backend_jobs::cron::names()
                .map(|j| (j.to_owned(), gce_backend_jobs::cron::default_every(j).to_owned()))
                .collect(),
            timing: Timing::default(),
            limits: Limits::default(),
            isolation: Isolation::default(),
            rate_limits: Default::default(),
            queues: BTreeMap::new(),
            concurrency: 64,
            stop_grace: Secs(20),
            providers: BTreeMap::new(),
            http: Default::default(),
            swarming: SwarmingServers::default(),
            tenants: gce_backend_jobs::config::trust::default_tenants(),
        }
    }
}

/// Longest an API call may take before it answers 503 (a listener's `idle_timeout` exceeds it).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// `[http]`: what every listener of the service allows a client.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Http {
    /// A request's head must arrive within this of the connection waiting for it (opened, or
    /// its previous answer sent), else the connection is closed: a silent, trickling or idle
    /// keep-alive connection lasts this long. 1 s to 10 minutes.
    pub header_read_timeout: Secs,
    /// A connection on which no byte moves either way for this long is closed (a client that
    /// stopped sending its body or reading its answer). Above [`CALL_TIMEOUT`] (31 s) to 1 hour.
    pub idle_timeout: Secs,
    /// Connections each listener serves at once; more wait unaccepted. 1 to 65 536.
    pub max_connections: usize,
    /// Connections each listener serves at once from one client address (an IPv6 address by
    /// its /64); one more is closed at once. 0 (no cap) to 65 536.
    pub max_connections_per_address: usize,
    /// Requests per valid bearer token (on the API's listener).
    pub per_token: Rate,
    /// Requests per client address (health checks and `register` have their own buckets).
    pub per_address: Rate,
    /// `register` calls per client address.
    pub register_per_address: Rate,
}

impl Default for Http {
    fn default() -> Self {
        let d = gce_backend_listener::Limits::DEFAULT;
        Http {
            header_read_timeout: Secs(d.header_read_timeout_ms / 1000),
            idle_timeout: Secs(d.idle_timeout_ms / 1000),
            max_connections: d.max_connections,
            max_connections_per_address: 64,
            per_token: Rate { rate: 50.0, burst: 500 },
            per_address: Rate { rate: 100.0, burst: 1000 },
            register_per_address: Rate { rate: 2.0, burst: 20 },
        }
    }
}

impl Http {
    /// The server's limits.
    pub fn limits(&self) -> gce_backend_listener::Limits {
        gce_backend_listener::Limits {
            header_read_timeout_ms: self.header_read_timeout.0.saturating_mul(1000),
            idle_timeout_ms: self.idle_timeout.0.saturating_mul(1000),
            max_connections: self.max_connections,
            max_connections_per_address: self.max_connections_per_address,
        }
    }

    /// Checks the ranges; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        let least = CALL_TIMEOUT.as_secs() + 1;
        if !(least..=3600).contains(&self.idle_timeout.0) {
            return Err(format!(
                "http.idle_timeout: must be from {least} s (more than {} s, the longest a call may take) to 1 hour",
                CALL_TIMEOUT.as_secs()
            ));
        }
        self.limits().validate().map_err(|e| format!("http.{e}"))?;
        for (key, r) in [
            ("per_token", self.per_token),
            ("per_address", self.per_address),
            ("register_per_address", self.register_per_address),
        ] {
            r.validate().map_err(|e| format!("http.{key}: {e}"))?;
        }
        Ok(())
    }
}

/// A schedule as a cron expression and its period in seconds (for the tick's claim key).
pub fn schedule(spec: &str) -> Result<(String, u64), String> {
    let spec = spec.trim();
    let every = |n: &str, unit: u64| -> Result<(String, u64), String> {
        let n: u64 = n.parse().map_err(|_| format!("{spec:?}: bad number"))?;
        match (unit, n) {
            (_, 0) => Err(format!("{spec:?}: must be positive")),
            (1, 60) => Ok(("0 * * * * *".into(), 60)),
            (1, n) if 60 % n == 0 => Ok((format!("*/{n} * * * * *"), n)),
            (60, 60) => Ok(("0 0 * * * *".into(), 3600)),
            (60, n) if 60 % n == 0 => Ok((format!("0 */{n} * * * *"), n * 60)),
            _ => Err(format!(
                "{spec:?}: an interval must divide a minute or an hour (or write a cron expression)"
            )),
        }
    };
    if let Some(n) = spec.strip_suffix('s').filter(|n| n.bytes().all(|b| b.is_ascii_digit())) {
        return every(n, 1);
    }
    if let Some(n) = spec.strip_suffix('m').filter(|n| n.bytes().all(|b| b.is_ascii_digit())) {
        return every(n, 60);
    }
    if spec == "1h" {
        return every("60", 60);
    }
    if spec.split_whitespace().count() == 6 {
        return Ok((spec.to_owned(), 1));
    }
    Err(format!("{spec:?}: not an interval (60s, 5m, 1h) nor a 6-field cron expression"))
}

impl Settings {
    /// The servers and tenants Configs are checked against.
    pub fn trust(&self) -> Result<Trust, String> {
        Trust::new(&self.swarming, &self.tenants)
    }

    /// Reads `path`, or takes the defaults when `None`.
    pub fn load(path: Option<&Path>) -> Result<Self, String> {
        let mut settings = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => format!(
                        "settings file {}: not found (run from the repository root, or pass --settings FILE)",
                        p.display()
                    ),
                    _ => format!("settings file {}: {e}", p.display()),
                })?;
                toml::from_str::<Settings>(&text).map_err(|e| format!("{}: {e}", p.display()))?
            }
            None => Settings::default(),
        };
        // A `[cron]` table names only what it changes.
        for (job, spec) in Settings::default().cron {
            settings.cron.entry(job).or_insert(spec);
        }
        settings.validate()?;
        Ok(settings)
    }

    /// Checks names, schedules and policies.
    pub fn validate(&self) -> Result<(), String> {
        for (job, spec) in &self.cron {
            if !gce_backend_jobs::cron::names().any(|j| j == job) {
                return Err(format!(
                    "cron.{job}: no such cron job (known: {})",
                    gce_backend_jobs::cron::names().collect::<Vec<_>>().join(", ")
                ));
            }
            schedule(spec).map_err(|e| format!("cron.{job}: {e}"))?;
        }
        for (q, p) in &self.queues {
            if !gce_backend_jobs::tasks::QUEUES.contains(&q.as_str()) {
                return Err(format!("queues.{q}: no such queue"));
            }
            p.validate().map_err(|e| format!("queues.{q}: {e}"))?;
        }
        self.limits.validate()?;
        self.isolation.validate()?;
        self.rate_limits.validate()?;
        if self.concurrency == 0 {
            return Err("concurrency: must be at least 1".into());
        }
        if self.stop_grace.0 > 600 {
            return Err("stop_grace: at most 10 minutes".into());
        }
        gce_backend_jobs::providers::Providers::new(&self.providers)?;
        self.http.validate()?;
        self.trust()?;
        let label_ok = |s: &str| {
            s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        };
        if self.deployment.is_empty() || self.deployment.len() > 63 || !label_ok(&self.deployment) {
            return Err("deployment: 1-63 characters of [a-z0-9_-]".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
