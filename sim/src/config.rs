//! Simulator settings (delays, quotas, caps) and faults, set by flags at start and changed at run
//! time through `POST /sim/faults`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::names::{server_key, valid_name};
use crate::quota::RateQuota;

mod groups;

pub use groups::{BotGroup, BotGroups};

/// What the simulator simulates and how fast.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
pub struct SimConfig {
    /// Seed of every random choice (ids, addresses, faults): same seed and requests, same answers.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Zones served; a zone's region is its name without the last `-x`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "us-central1-a,us-central1-b,us-central1-c,us-east1-b,europe-west1-b"
    )]
    pub zones: Vec<String>,
    /// Operation duration: PENDING for half of it, RUNNING for the other half, then DONE.
    #[arg(long, default_value_t = 400)]
    pub op_ms: u64,
    /// PROVISIONING → STAGING.
    #[arg(long, default_value_t = 300)]
    pub provision_ms: u64,
    /// STAGING → RUNNING.
    #[arg(long, default_value_t = 300)]
    pub stage_ms: u64,
    /// STOPPING → TERMINATED; a deleted instance is gone as long again after that.
    #[arg(long, default_value_t = 300)]
    pub stop_ms: u64,
    /// SUSPENDING → SUSPENDED (`instances.suspend`).
    #[arg(long, default_value_t = 300)]
    pub suspend_ms: u64,
    /// A resumed instance: STAGING → RUNNING (`instances.resume`); its bot is back at once.
    #[arg(long, default_value_t = 300)]
    pub resume_ms: u64,
    /// From RUNNING to the bot's first connection.
    #[arg(long, default_value_t = 500)]
    pub bot_connect_ms: u64,
    /// From an instance's stop to its bot being dead (`is_dead`).
    #[arg(long, default_value_t = 1000)]
    pub bot_death_ms: u64,
    /// Length of each simulated task a bot runs (0: bots stay idle).
    #[arg(long, default_value_t = 0)]
    pub bot_task_ms: u64,
    /// Idle time between a bot's tasks.
    #[arg(long, default_value_t = 1000)]
    pub bot_idle_ms: u64,
    /// CPU quota per project and region.
    #[arg(long, default_value_t = 1_000_000.0)]
    pub cpu_quota: f64,
    /// Instance quota per project and region.
    #[arg(long, default_value_t = 1_000_000)]
    pub instance_quota: u64,
    /// CPUs per machine type, added to the built-in table: `name=cpus,...`.
    #[arg(long, value_delimiter = ',', value_parser = parse_machine)]
    pub machine_cpus: Vec<(String, f64)>,
    /// How long a requestId returns its first operation.
    #[arg(long, default_value_t = 86_400)]
    pub request_id_window_s: u64,
    /// Longest `zoneOperations.wait` blocks.
    #[arg(long, default_value_t = 30_000)]
    pub wait_max_ms: u64,
    /// Instances held at most; inserts beyond fail as a stockout.
    #[arg(long, default_value_t = 250_000)]
    pub max_instances: usize,
    /// Bots held at most: past it, deleted and dead bots are dropped (live bots stand for live
    /// instances, which `max_instances` caps).
    #[arg(long, default_value_t = 250_000)]
    pub max_bots: usize,
    /// Operations remembered (with their requestIds); the oldest are forgotten.
    #[arg(long, default_value_t = 500_000)]
    pub max_operations: usize,
    /// Bot groups at start, as the JSON `POST /sim/bot_groups` takes: {"groups": [{"prefix":
    /// "ci-linux-", "dimensions": {"pool": ["ci"], "os": ["Linux"]}}]}. A bot takes the dimensions
    /// of the group with the longest prefix of its id (as Swarming's bots.cfg gives them).
    #[arg(long, value_parser = parse_groups, default_value = "{\"groups\": []}", verbatim_doc_comment)]
    pub bot_groups: BotGroups,
    /// Faults at start, as the JSON `POST /sim/faults` takes; every field is optional and replaces
    /// that field: {"errors": {METHOD: {"rate": 0..1, "status": 503|429|403}}, "latency_ms":
    /// {METHOD: ms}, "never_boot_rate": 0..1, "bot_never_connect_rate": 0..1,
    /// "bot_early_death_rate": 0..1, "bot_early_death_ms": ms, "spot_preempt_rate": 0..1,
    /// "spot_preempt_ms": ms, "stockout_zones": [zone], "stockouts": [zone or zone/machine-type],
    /// "broken_images": [image],
    /// "quotas": {"region" or "project/region": {"cpus": n, "instances": n}},
    /// "swarming_servers": {HOST: "hang" or "malformed"}, "compute_hang": true}. METHOD is `*` or
    /// one of compute.instances.{insert,delete,get,list}, compute.zoneOperations.{get,wait},
    /// compute.instances.{suspend,resume,stop,start,bulkInsert}, compute.zones.list,
    /// compute.diskTypes.list, compute.regions.list, compute.regionInstances.bulkInsert,
    /// compute.regionOperations.get, compute.instanceTemplates.{insert,get,delete,list},
    /// compute.globalOperations.get, swarming.{GetBot,ListBots,ListBotEvents,TerminateBot,DeleteBot,
    /// CountBots,CountTasks}. A Swarming server HOST
    /// (e.g. swarm.example.com) set to "hang" takes every pRPC call and never answers (10
    /// minutes); "malformed" answers HTTP 200 with the pRPC headers and a body that is not JSON.
    /// "compute_hang" makes Compute Engine silent: every Compute call is taken and not answered
    /// until the fault is lifted (at most 10 minutes), as in an outage.
    #[arg(long, value_parser = parse_faults, default_value = "{}", verbatim_doc_comment)]
    pub faults: Faults,
    /// API rate quotas per project, per minute on the simulator's clock (refilled at each
    /// synchronized minute); a call over one is answered 403 `rateLimitExceeded` and does
    /// nothing. `none`: no rate quota. `gce-default`: Compute Engine's older published defaults,
    /// 1 500 a minute in each group (mutations, reads, lists, operation reads; a bulkInsert is one
    /// mutation), bulk inserts also at most 20 a second and 10 running. Else a JSON file:
    /// {"default": {LIMITS}, "projects": {"my-project": {LIMITS}}}, LIMITS any of "mutations",
    /// "reads", "lists", "operations", "bulk_per_second", "bulk_running" (0: no limit); limits not
    /// given in "default" are gce-default's, those not given for a project are "default"'s.
    #[arg(long, value_parser = RateQuota::parse, default_value = "gce-default", verbatim_doc_comment)]
    pub quota: RateQuota,
    /// Google authentication: whether calls need a token, how long one lives (`auth.rs`).
    #[command(flatten)]
    #[serde(default)]
    pub auth: crate::auth::AuthSettings,
}

fn parse_machine(s: &str) -> Result<(String, f64), String> {
    let (name, cpus) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected name=cpus"))?;
    let cpus: f64 = cpus.parse().map_err(|_| format!("{s:?}: cpus must be a number"))?;
    Ok((name.to_owned(), cpus))
}

fn parse_groups(s: &str) -> Result<BotGroups, String> {
    BotGroups::parse(&serde_json::from_str(s).map_err(|e| format!("bot groups JSON: {e}"))?)
}

fn parse_faults(s: &str) -> Result<Faults, String> {
    let mut f = Faults::default();
    f.apply(serde_json::from_str(s).map_err(|e| format!("faults JSON: {e}"))?)?;
    Ok(f)
}

impl Default for SimConfig {
    fn default() -> Self {
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            cfg: SimConfig,
        }
        <Wrap as clap::Parser>::parse_from(["sim"]).cfg
    }
}

impl SimConfig {
    /// CPUs of a machine type (a name or a URL ending in it).
    pub fn cpus_of(&self, machine_type: &str) -> f64 {
        let name = machine_type.rsplit('/').next().unwrap_or(machine_type);
        if let Some((_, cpus)) = self.machine_cpus.iter().find(|(n, _)| n == name) {
            return *cpus;
        }
        match name {
            "f1-micro" | "g1-small" => 1.0,
            "e2-micro" | "e2-small" | "e2-medium" => 2.0,
            _ => {
                // custom-<cpus>-<mem>, <family>-<kind>-<cpus> (n1-standard-8, e2-highcpu-16, ...).
                let parts: Vec<&str> = name.split('-').collect();
                let n = if parts.first() == Some(&"custom") { parts.get(1) } else { parts.last() };
                n.and_then(|n| n.parse().ok()).unwrap_or(1.0)
            }
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        if self.zones.is_empty() {
            return Err("--zones: at least one zone".into());
        }
        for z in &self.zones {
            if !valid_name(z) || !z.contains('-') {
                return Err(format!("--zones: {z:?} is not a zone name like us-central1-b"));
            }
        }
        if self.bot_task_ms > 0 && self.bot_task_ms + self.bot_idle_ms == 0 {
            return Err("--bot-idle-ms: must be positive".into());
        }
        Ok(())
    }
}

/// Every method a fault may name (besides `*`), as the simulator counts them in `/sim/calls`.
pub const METHODS: &[&str] = &[
    "compute.instances.insert",
    "compute.instances.delete",
    "compute.instances.get",
    "compute.instances.list",
    "compute.instances.suspend",
    "compute.instances.resume",
    "compute.instances.stop",
    "compute.instances.start",
    "compute.zoneOperations.get",
    "compute.zoneOperations.wait",
    "compute.zones.list",
    "compute.diskTypes.list",
    "compute.regions.list",
    "compute.instances.bulkInsert",
    "compute.regionInstances.bulkInsert",
    "compute.regionOperations.get",
    "compute.instanceTemplates.insert",
    "compute.instanceTemplates.get",
    "compute.instanceTemplates.delete",
    "compute.instanceTemplates.list",
    "compute.globalOperations.get",
    "swarming.GetBot",
    "swarming.ListBots",
    "swarming.ListBotEvents",
    "swarming.TerminateBot",
    "swarming.DeleteBot",
    "swarming.CountBots",
    "swarming.CountTasks",
];

fn known_method(field: &str, method: &str) -> Result<(), String> {
    if method == "*" || METHODS.contains(&method) {
        return Ok(());
    }
    Err(format!("{field}.{method}: no such method (use * or one of {})", METHODS.join(", ")))
}

/// An injected error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorFault {
    /// Share of calls that fail, 0 to 1.
    pub rate: f64,
    /// 503 (backend error / UNAVAILABLE), 429 (rate limited) or 403 (`rateLimitExceeded`).
    pub status: u16,
}

/// Quota limits of one region (optionally of one project).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaLimits {
    /// CPUS.
    pub cpus: f64,
    /// INSTANCES.
    pub instances: u64,
}

/// What a Swarming server does with every pRPC call (faults `swarming_servers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerFault {
    /// Takes the request and never answers (holds it far beyond any client timeout).
    Hang,
    /// Answers HTTP 200 with the pRPC headers (`X-Prpc-Grpc-Code: 0`) and a body that is not JSON.
    Malformed,
}

/// Faults in force.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Faults {
    /// Error answers by method (`compute.instances.insert`, `swarming.GetBot`, ... or `*`).
    pub errors: BTreeMap<String, ErrorFault>,
    /// Added latency in milliseconds by method (or `*`).
    pub latency_ms: BTreeMap<String, u64>,
    /// Share of new instances that never boot (stay STAGING).
    pub never_boot_rate: f64,
    /// Share of booted instances whose bot never connects.
    pub bot_never_connect_rate: f64,
    /// Share of bots that die `bot_early_death_ms` after connecting.
    pub bot_early_death_rate: f64,
    /// See `bot_early_death_rate`.
    pub bot_early_death_ms: u64,
    /// Share of Spot and preemptible instances preempted `spot_preempt_ms` after they run.
    #[serde(default)]
    pub spot_preempt_rate: f64,
    /// See `spot_preempt_rate`.
    #[serde(default)]
    pub spot_preempt_ms: u64,
    /// Zones out of capacity: inserts fail with ZONE_RESOURCE_POOL_EXHAUSTED.
    pub stockout_zones: BTreeSet<String>,
    /// Out of capacity: a zone (`us-central1-c`, as `stockout_zones`) or one machine type in a
    /// zone (`us-central1-b/n2-standard-8`).
    #[serde(default)]
    pub stockouts: BTreeSet<String>,
    /// Boot images whose instances' bots never connect (a broken image).
    #[serde(default)]
    pub broken_images: BTreeSet<String>,
    /// Quota limits by `region` or `project/region`, over the defaults.
    pub quotas: BTreeMap<String, QuotaLimits>,
    /// Broken Swarming servers by host (`swarm.example.com`).
    #[serde(default)]
    pub swarming_servers: BTreeMap<String, ServerFault>,
    /// Compute Engine is silent: every Compute call waits, unanswered, until this is lifted (at
    /// most 10 minutes), then is answered as usual.
    #[serde(default)]
    pub compute_hang: bool,
}

/// A change of faults: each field given replaces that field.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsPatch {
    errors: Option<BTreeMap<String, ErrorFault>>,
    latency_ms: Option<BTreeMap<String, u64>>,
    never_boot_rate: Option<f64>,
    bot_never_connect_rate: Option<f64>,
    bot_early_death_rate: Option<f64>,
    bot_early_death_ms: Option<u64>,
    spot_preempt_rate: Option<f64>,
    spot_preempt_ms: Option<u64>,
    stockout_zones: Option<BTreeSet<String>>,
    stockouts: Option<BTreeSet<String>>,
    broken_images: Option<BTreeSet<String>>,
    quotas: Option<BTreeMap<String, QuotaLimits>>,
    swarming_servers: Option<BTreeMap<String, ServerFault>>,
    compute_hang: Option<bool>,
}

impl Faults {
    /// Applies `patch` after checking it; on error nothing changes.
    pub fn apply(&mut self, patch: FaultsPatch) -> Result<(), String> {
        let rate = |name: &str, r: Option<f64>| match r {
            Some(r) if !(0.0..=1.0).contains(&r) => Err(format!("{name}: {r} is not between 0 and 1")),
            _ => Ok(()),
        };
        rate("never_boot_rate", patch.never_boot_rate)?;
        rate("bot_never_connect_rate", patch.bot_never_connect_rate)?;
        rate("bot_early_death_rate", patch.bot_early_death_rate)?;
        rate("spot_preempt_rate", patch.spot_preempt_rate)?;
        for method in patch.latency_ms.iter().flatten().map(|(m, _)| m) {
            known_method("latency_ms", method)?;
        }
        for (method, e) in patch.errors.iter().flatten() {
            known_method("errors", method)?;
            rate(&format!("errors.{method}.rate"), Some(e.rate))?;
            if ![503, 429, 403].contains(&e.status) {
                return Err(format!("errors.{method}.status: {} (use 503, 429 or 403)", e.status));
            }
        }
        for s in patch.stockouts.iter().flatten() {
            let (zone, machine) = s.split_once('/').map_or((s.as_str(), None), |(z, m)| (z, Some(m)));
            if !valid_name(zone) || !zone.contains('-') || machine.is_some_and(|m| !valid_name(m)) {
                return Err(format!(
                    "stockouts: {s:?} is not a zone (us-central1-c) or a zone and machine type (us-central1-b/n2-standard-8)"
                ));
            }
        }
        let servers = match patch.swarming_servers {
            Some(m) => Some(server_hosts(m)?),
            None => None,
        };
        let mut next = self.clone();
        macro_rules! take {
            ($($f:ident),*) => { $( if let Some(v) = patch.$f { next.$f = v; } )* };
        }
        take!(
            errors,
            latency_ms,
            never_boot_rate,
            bot_never_connect_rate,
            bot_early_death_rate,
            bot_early_death_ms,
            spot_preempt_rate,
            spot_preempt_ms,
            stockout_zones,
            stockouts,
            broken_images,
            quotas,
            compute_hang
        );
        if let Some(m) = servers {
            next.swarming_servers = m;
        }
        *self = next;
        Ok(())
    }

    /// The quota limits of `project` in `region`.
    pub fn limits(&self, project: &str, region: &str, cfg: &SimConfig) -> QuotaLimits {
        self.quotas
            .get(&format!("{project}/{region}"))
            .or_else(|| self.quotas.get(region))
            .cloned()
            .unwrap_or(QuotaLimits { cpus: cfg.cpu_quota, instances: cfg.instance_quota })
    }

    /// Whether `zone` is out of capacity for `machine_type` (a name or a URL ending in it):
    /// the zone is (`stockout_zones` or `stockouts`), or that machine type in it is.
    pub fn stocked_out(&self, zone: &str, machine_type: &str) -> bool {
        let machine = machine_type.rsplit('/').next().unwrap_or(machine_type);
        self.stockout_zones.contains(zone)
            || self.stockouts.contains(zone)
            || self.stockouts.contains(&format!("{zone}/{machine}"))
    }

    /// The injected error for `method`, if any.
    pub fn error_for(&self, method: &str) -> Option<&ErrorFault> {
        self.errors.get(method).or_else(|| self.errors.get("*"))
    }

    /// The fault of the Swarming server `server` (a host or URL), if any.
    pub fn server_fault(&self, server: &str) -> Option<ServerFault> {
        self.swarming_servers.get(&server_key(server)).copied()
    }

    /// The added latency for `method`.
    pub fn latency_for(&self, method: &str) -> u64 {
        self.latency_ms.get(method).or_else(|| self.latency_ms.get("*")).copied().unwrap_or(0)
    }

    /// The faults in force, one name each: `errors.<method>`, `latency_ms.<method>`,
    /// `never_boot_rate`, `bot_never_connect_rate`, `bot_early_death_rate`,
    /// `stockout_zones.<zone>`, `stockouts.<zone>[/<machine type>]`, `quotas.<region>`,
    /// `swarming_servers.<host>`.
    pub fn active(&self) -> Vec<String> {
        let named = |field: &str, keys: &mut dyn Iterator<Item = &String>| -> Vec<String> {
            keys.map(|k| format!("{field}.{k}")).collect()
        };
        let mut out = named("errors", &mut self.errors.iter().filter(|(_, e)| e.rate > 0.0).map(|(m, _)| m));
        out.extend(named(
            "latency_ms",
            &mut self.latency_ms.iter().filter(|(_, ms)| **ms > 0).map(|(m, _)| m),
        ));
        for (field, rate) in [
            ("never_boot_rate", self.never_boot_rate),
            ("bot_never_connect_rate", self.bot_never_connect_rate),
            ("bot_early_death_rate", self.bot_early_death_rate),
            ("spot_preempt_rate", self.spot_preempt_rate),
        ] {
            if rate > 0.0 {
                out.push(field.to_owned());
            }
        }
        out.extend(named("stockout_zones", &mut self.stockout_zones.iter()));
        out.extend(named("stockouts", &mut self.stockouts.iter()));
        out.extend(named("broken_images", &mut self.broken_images.iter()));
        out.extend(named("quotas", &mut self.quotas.keys()));
        out.extend(named("swarming_servers", &mut self.swarming_servers.keys()));
        if self.compute_hang {
            out.push("compute_hang".into());
        }
        out
    }
}

/// Checks the hosts of `swarming_servers` and keys them as the pRPC routes name servers (a URL
/// such as `https://swarm.example.com/` becomes `swarm.example.com`).
fn server_hosts(m: BTreeMap<String, ServerFault>) -> Result<BTreeMap<String, ServerFault>, String> {
    let mut out = BTreeMap::new();
    for (name, fault) in m {
        let host = server_key(&name);
        if host.is_empty() || host.contains(|c: char| c == '/' || c.is_whitespace()) {
            return Err(format!("swarming_servers.{name}: not a server host like swarm.example.com"));
        }
        out.insert(host, fault);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
