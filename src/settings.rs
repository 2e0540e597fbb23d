//! Service settings (`config/service.toml`): the deployment name, cron schedules, timings and
//! queue policies. Every key is optional (a cron job left out keeps the default 60 s); unknown
//! keys are errors.

use std::collections::BTreeMap;
use std::path::Path;

use gce_backend_jobs::config::{SwarmingServers, Tenant, Trust};
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
    /// Where machines come from: `[providers.<id>]` with its `type` (none declared: one
    /// Compute Engine provider, `gce`). A Config names its provider (default: the one of type
    /// `gce`).
    pub providers: BTreeMap<String, gce_backend_jobs::providers::Declared>,
    /// What every listener (the API's, `--metrics-listen`) allows a client (`[http]`):
    /// timeouts, a connection cap, request rates per token and per address.
    pub http: crate::api::listen::Http,
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
            cron: gce_backend_jobs::cron::names().map(|j| (j.to_owned(), "60s".to_owned())).collect(),
            timing: Timing::default(),
            limits: Limits::default(),
            isolation: Isolation::default(),
            rate_limits: Default::default(),
            queues: BTreeMap::new(),
            concurrency: 64,
            providers: BTreeMap::new(),
            http: Default::default(),
            swarming: SwarmingServers::default(),
            tenants: gce_backend_jobs::config::trust::default_tenants(),
        }
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
mod tests {
    use super::*;

    #[test]
    fn schedules_are_intervals_or_cron_expressions() {
        assert_eq!(schedule("60s").unwrap(), ("0 * * * * *".into(), 60));
        assert_eq!(schedule("2s").unwrap(), ("*/2 * * * * *".into(), 2));
        assert_eq!(schedule("15m").unwrap(), ("0 */15 * * * *".into(), 900));
        assert_eq!(schedule("1h").unwrap().1, 3600);
        assert!(schedule("7s").is_err() && schedule("0s").is_err() && schedule("soon").is_err());
    }

    #[test]
    fn the_shipped_settings_file_is_valid_and_unknown_keys_are_refused() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/service.toml");
        Settings::load(Some(&path)).unwrap();
        assert!(toml::from_str::<Settings>("bogus = 1").is_err());
        let bad: Settings = toml::from_str("[cron]\nimport_configs = \"7s\"").unwrap();
        assert!(bad.validate().unwrap_err().contains("cron.import_configs"));
        let bad: Settings = toml::from_str("deployment = \"Prod Fleet\"").unwrap();
        assert!(bad.validate().unwrap_err().contains("deployment"));
    }

    #[test]
    fn providers_are_declared_by_id_and_type() {
        let two: Settings =
            toml::from_str("[providers.east]\ntype = \"gce\"\n[providers.gce]\ntype = \"gce\"").unwrap();
        two.validate().unwrap();
        assert_eq!(two.providers.len(), 2);
        let e = toml::from_str::<Settings>("[providers.aws]\ntype = \"ec2\"").unwrap_err().to_string();
        assert!(e.contains("unknown variant `ec2`") && e.contains("gce"), "{e}");
        let e = toml::from_str::<Settings>("[providers.gce]\nkind = \"gce\"").unwrap_err().to_string();
        assert!(e.contains("kind"), "{e}");
        let bad: Settings = toml::from_str("[providers.East]\ntype = \"gce\"").unwrap();
        assert!(bad.validate().unwrap_err().contains("providers.East"));
    }

    #[test]
    fn servers_and_tenants_are_checked_at_load() {
        let s: Settings = toml::from_str("[swarming]\nservers = [\"https://s.example.com/path\"]").unwrap();
        assert!(s.validate().unwrap_err().contains("swarming.servers[0]"));
        let s: Settings =
            toml::from_str("[tenants.a]\nprefixes = [\"web*\"]\n[tenants.b]\nprefixes = [\"web-b-*\"]")
                .unwrap();
        assert!(s.validate().unwrap_err().contains("overlap"));
        assert!(toml::from_str::<Settings>("[tenants.a]\nprefix = [\"a-*\"]").is_err(), "unknown key");
        // Left out: the example server and one open tenant.
        let t = Settings::default().trust().unwrap();
        assert!(t.server("https://swarm.example.com").is_ok());
        assert!(t.server("https://chromium-swarm.appspot.com").is_err());
    }

    #[test]
    fn a_partial_cron_table_keeps_the_other_jobs() {
        let path = std::env::temp_dir().join(format!("gce-backend-settings-{}.toml", std::process::id()));
        std::fs::write(&path, "[cron]\naudit_instances = \"5m\"\n").unwrap();
        let s = Settings::load(Some(&path)).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(s.cron["audit_instances"], "5m");
        assert_eq!(s.cron["manage_bots"], "60s");
        assert_eq!(s.cron.len(), gce_backend_jobs::cron::names().count());
    }
}
