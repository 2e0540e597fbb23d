//! Providers: where a Config's machines come from. One contract ([`Provider`]), the declared
//! providers of a deployment ([`Providers`], from settings `[providers.<id>]`), and the one
//! place a Config or a VM is matched to its provider.
//!
//! The handlers keep what every provider shares (is the VM still wanted, paused, drained; the
//! bot's life); a provider owns what is its own: checking a Config against what it offers,
//! making and removing one machine (idempotently, at its source), and saying whether a machine
//! is up. Seed 000 (Taskcluster worker-manager's providers) is the model.

pub mod gce;
pub mod identity;
pub mod static_machines;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;

use crate::catalog::Verdict;
use crate::config::{Config, ConfigError};
use crate::env::Env;
use crate::error::TaskError;
use crate::model::{ConfigRecord, Vm};
use crate::ports::store::Versioned;
use crate::work::Next;

/// What a provider says of a machine it made (asked when its bot looks dead or gone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Up, as far as the provider knows (`status`: its own word, e.g. `RUNNING`).
    Up(String),
    /// Down for good (stopped, preempted, suspended): replace it at once.
    Down(String),
    /// The provider has no such machine.
    Gone,
}

/// The contract of a machine source. Every method may be called by many processes at once and
/// more than once for the same machine; each is idempotent.
#[async_trait]
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// Its type, as declared (`gce`).
    fn kind(&self) -> Kind;

    /// Called once per provider per process before any other method, again after it failed
    /// (the provider's other calls wait for it; other providers do not). Idempotent, and safe
    /// when many processes start at once.
    async fn setup(&self, ctx: &Env) -> Result<(), TaskError>;

    /// Its own rules for `config` (beyond the rules every Config follows): what the provider
    /// does not offer is [`Verdict::Invalid`] with the field named; [`Verdict::Unknown`] when
    /// it cannot tell now (the Config is stored unverified and checked again).
    async fn validate(&self, ctx: &Env, config: &Config) -> Verdict;

    /// One step towards `vm` having its machine, given the VM as read (it is wanted, not
    /// paused, and has no machine recorded yet: the handler checked). Records what it did on
    /// the VM with a compare-and-set; [`Next::After`] to look again.
    async fn create(&self, ctx: &Env, vm: Versioned<Vm>) -> Result<Next, TaskError>;

    /// One step towards `vm`'s machine being gone, given the VM as read (its machine is the one
    /// the task named, and its removal has started). [`Next::Done`] once it is gone.
    async fn remove(&self, ctx: &Env, vm: Vm) -> Result<Next, TaskError>;

    /// Whether `vm`'s machine is up.
    async fn check(&self, ctx: &Env, vm: &Vm) -> Result<Health, TaskError>;

    /// Checks `proof` (what a machine sends to register; Compute Engine: an instance identity
    /// token for `audience`) and names the VM it proves to be: one of ours, its current
    /// incarnation, not registered yet. Every failure is one [`identity::Refused`], whose
    /// reason the caller keeps to itself. By default a provider takes no registration.
    async fn identify(&self, _ctx: &Env, _proof: &str, _audience: &str) -> Result<Proven, identity::Refused> {
        Err(identity::Refused("this provider takes no registration"))
    }

    /// Called before a periodic scan of this provider's machines (`inspect_instances`).
    async fn scan_prepare(&self, _ctx: &Env) -> Result<(), TaskError> {
        Ok(())
    }

    /// Called after that scan's tasks were pushed.
    async fn scan_cleanup(&self, _ctx: &Env) -> Result<(), TaskError> {
        Ok(())
    }

    /// True when its machines were there before their VM and stay after it (static): a bot
    /// first seen before the VM was made is then the machine's own, not an earlier
    /// incarnation's (unless Swarming deleted it).
    fn machines_outlive_vms(&self) -> bool {
        false
    }
}

/// A VM a machine proved to be (see [`Provider::identify`]).
#[derive(Debug, Clone)]
pub struct Proven {
    /// The VM, as read.
    pub vm: Versioned<Vm>,
    /// When the proof expires.
    pub expires: DateTime<Utc>,
    /// The provider's id of the machine (Compute Engine: the instance id).
    pub instance_id: String,
}

/// Types of provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Compute Engine instances, through the process's Compute port.
    Gce,
    /// Existing machines listed by hostname (`machines`); none is made or removed.
    Static,
}

impl Kind {
    /// Every type, in order.
    pub const ALL: [Kind; 2] = [Kind::Gce, Kind::Static];

    /// Its name, as declared (`gce`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Gce => "gce",
            Kind::Static => "static",
        }
    }

    /// The JSON Schema of the Config fields this type reads (published with the API's schemas
    /// as `provider-<type>.json`).
    pub fn schema(self) -> serde_json::Value {
        let s = match self {
            Kind::Gce => schemars::schema_for!(gce::GceFields),
            Kind::Static => schemars::schema_for!(static_machines::StaticFields),
        };
        serde_json::to_value(s).unwrap_or_default()
    }

    /// True when a Config of this type lists its machines (else it has an amount).
    fn lists_machines(self) -> bool {
        self == Kind::Static
    }
}

/// One `[providers.<id>]` of the settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declared {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: Kind,
}

/// The id of the provider every deployment has unless its settings say otherwise.
pub const DEFAULT_ID: &str = "gce";

/// Largest length of a provider id.
const MAX_ID: usize = 32;

/// Why a provider id is not one (`None`: it is): lowercase letters, digits and `-`, starting with
/// a letter, at most 32 characters (it goes into status lines and metric labels).
pub fn id_problem(id: &str) -> Option<String> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    (!ok).then(|| {
        format!("{id:?}: a provider id is 1 to {MAX_ID} of a-z, 0-9 and '-', starting with a letter")
    })
}

/// How long a failed setup is not tried again (calls fail at once meanwhile).
const SETUP_RETRY_SECS: i64 = 10;
/// Longest a setup may take.
const SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

struct Entry {
    provider: Arc<dyn Provider>,
    ready: OnceCell<()>,
    /// The last failed setup: when, why, and whether trying again may help.
    failed: std::sync::Mutex<Option<(DateTime<Utc>, String, bool)>>,
}

impl Entry {
    fn new(provider: Arc<dyn Provider>) -> Self {
        Self { provider, ready: OnceCell::new(), failed: std::sync::Mutex::new(None) }
    }

    /// The last failure, while it is recent.
    fn recent_failure(&self, id: &str, now: DateTime<Utc>) -> Option<TaskError> {
        let f = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        f.as_ref().filter(|(at, ..)| now - *at < chrono::Duration::seconds(SETUP_RETRY_SECS)).map(
            |(_, message, transient)| TaskError::Provider {
                id: id.to_owned(),
                message: message.clone(),
                transient: *transient,
            },
        )
    }

    /// Runs the setup (bounded in time) and records how it went; logs only when that changes.
    /// Within [`SETUP_RETRY_SECS`] of a failure it fails at once with that failure.
    async fn set_up(&self, ctx: &Env, id: &str) -> Result<(), TaskError> {
        if let Some(e) = self.recent_failure(id, ctx.now()) {
            return Err(e);
        }
        let run = tokio::time::timeout(SETUP_TIMEOUT, self.provider.setup(ctx)).await;
        let (message, transient) = match run {
            Ok(Ok(())) => {
                if self.failed.lock().unwrap_or_else(|e| e.into_inner()).take().is_some() {
                    tracing::info!(provider = %id, "provider set up");
                }
                return Ok(());
            }
            Ok(Err(e)) => (format!("setup failed: {e}"), e.class() == crate::error::Class::Transient),
            Err(_) => (format!("setup took over {}s", SETUP_TIMEOUT.as_secs()), true),
        };
        let mut f = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if f.as_ref().is_none_or(|(_, m, _)| *m != message) {
            tracing::error!(provider = %id, error = %message, "provider not set up: its calls fail until a try succeeds (every {SETUP_RETRY_SECS}s at most)");
        }
        *f = Some((ctx.now(), message.clone(), transient));
        Err(TaskError::Provider { id: id.to_owned(), message, transient })
    }
}

/// The declared providers of a deployment, by id, each set up once per process.
pub struct Providers {
    by_id: BTreeMap<String, Entry>,
    default: String,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers").field("ids", &self.ids()).field("default", &self.default).finish()
    }
}

impl Default for Providers {
    /// One Compute Engine provider, `gce`.
    fn default() -> Self {
        Self::new(&BTreeMap::from([(DEFAULT_ID.to_owned(), Declared { kind: Kind::Gce })]))
            .expect("the default provider is valid")
    }
}

impl Providers {
    /// The providers `declared` (none declared: the default `gce`). A Config that names no
    /// provider gets the one of type `gce` (or, of several, the one with id `gce`).
    pub fn new(declared: &BTreeMap<String, Declared>) -> Result<Self, String> {
        if declared.is_empty() {
            return Ok(Self::default());
        }
        let mut by_id = BTreeMap::new();
        for (id, d) in declared {
            if let Some(why) = id_problem(id) {
                return Err(format!("[providers.{id}]: {why}"));
            }
            let provider: Arc<dyn Provider> = match d.kind {
                Kind::Gce => Arc::new(gce::Gce),
                Kind::Static => Arc::new(static_machines::Static),
            };
            by_id.insert(id.clone(), Entry::new(provider));
        }
        let gce: Vec<&String> =
            declared.iter().filter(|(_, d)| d.kind == Kind::Gce).map(|(id, _)| id).collect();
        let default = match gce.as_slice() {
            [one] => (*one).clone(),
            _ if declared.contains_key(DEFAULT_ID) => DEFAULT_ID.to_owned(),
            _ => String::new(), // every Config must name its provider
        };
        Ok(Self { by_id, default })
    }

    /// These providers and `provider` as `id` (replacing one of that id): a type of provider
    /// that is not declared through settings (tests, embedders).
    pub fn with(mut self, id: &str, provider: Arc<dyn Provider>) -> Self {
        self.by_id.insert(id.to_owned(), Entry::new(provider));
        self
    }

    /// The type of provider `id` (empty: the default), if declared.
    pub fn kind(&self, id: &str) -> Option<Kind> {
        self.by_id.get(self.resolve(id)).map(|e| e.provider.kind())
    }

    /// The declared ids, sorted.
    pub fn ids(&self) -> Vec<&str> {
        self.by_id.keys().map(String::as_str).collect()
    }

    /// The id a Config's `provider` field stands for (empty: the default).
    pub fn resolve<'a>(&'a self, named: &'a str) -> &'a str {
        if named.is_empty() { &self.default } else { named }
    }

    /// True when `vm`'s machine is a static one (only recorded and released, never made or
    /// deleted): logs call it so.
    pub fn is_static(&self, vm: &Vm) -> bool {
        self.kind(&vm.provider) == Some(Kind::Static)
    }

    /// The one rule for "is this VM still wanted by its Config": its index is below the
    /// current amount and its machine comes from the Config's provider.
    pub fn keeps(&self, rec: &ConfigRecord, vm: &Vm) -> bool {
        rec.wants(vm.index) && self.resolve(&rec.config.provider) == self.resolve(&vm.provider)
    }

    /// Why `config` cannot use a provider here (`None`: it can).
    pub fn problem(&self, config: &Config) -> Option<ConfigError> {
        let id = self.resolve(&config.provider);
        let rule = if id.is_empty() {
            format!(
                "several providers are declared and none is the default: name one of {}",
                self.ids().join(", ")
            )
        } else if !self.by_id.contains_key(id) {
            format!("provider {id:?} is not declared in the settings (declared: {})", self.ids().join(", "))
        } else if let Some(kind) = self.kind(id).filter(|k| k.lists_machines() != config.is_static()) {
            let (field, rule) = match kind.lists_machines() {
                true => (
                    "provider",
                    format!(
                        "provider {id:?} is of type {}: list the pool's hostnames in `machines` instead of an amount",
                        kind.name()
                    ),
                ),
                false => (
                    "machines",
                    format!(
                        "lists static machines, but provider {id:?} is of type {}: name a provider of type static",
                        kind.name()
                    ),
                ),
            };
            return Some(ConfigError { field: format!("{}.{field}", config.prefix), rule });
        } else {
            return None;
        };
        Some(ConfigError { field: format!("{}.provider", config.prefix), rule })
    }

    /// The provider with id `id` (empty: the default), set up in this process.
    pub async fn get(&self, ctx: &Env, id: &str) -> Result<&Arc<dyn Provider>, TaskError> {
        let id = self.resolve(id);
        let Some(e) = self.by_id.get(id) else {
            let message = format!("not declared in the settings (declared: {})", self.ids().join(", "));
            return Err(TaskError::Provider { id: id.to_owned(), message, transient: false });
        };
        e.ready.get_or_try_init(|| e.set_up(ctx, id)).await?;
        Ok(&e.provider)
    }

    /// Sets up every provider; a failure is logged and leaves the others working.
    pub async fn setup_all(&self, ctx: &Env) {
        for id in self.by_id.keys() {
            let _ = self.get(ctx, id).await;
        }
    }
}

/// The `provider_changed` mark of a Config record replacing `old` with `new`: now when the
/// provider changes (or `old` stood in for a record that did not decode, whose VMs' provider is
/// unknown), else `old`'s (a change still going on stays marked).
pub fn changed(
    providers: &Providers,
    old: &ConfigRecord,
    new: &Config,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let other = providers.resolve(&old.config.provider) != providers.resolve(&new.provider);
    if other || old.revision.is_empty() { Some(now) } else { old.provider_changed }
}

#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod tests;
