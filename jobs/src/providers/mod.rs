//! Providers: where a Config's machines come from. One contract ([`Provider`]), the declared
//! providers of a deployment ([`Providers`], from settings `[providers.<id>]`), and the one
//! place a Config or a VM is matched to its provider.
//!
//! The handlers keep what every provider shares (is the VM still wanted, paused, drained; the
//! bot's life); a provider owns what is its own: checking a Config against what it offers,
//! making and removing one machine (idempotently, at its source), and saying whether a machine
//! is up. Seed 000 (Taskcluster worker-manager's providers) is the model.

pub mod gce;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;

use crate::catalog::Verdict;
use crate::config::{Config, ConfigError};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{ConfigRecord, Vm};
use crate::ports::store::Versioned;
use crate::tasks::Next;

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
    async fn setup(&self, ctx: &Ctx) -> Result<(), TaskError>;

    /// Its own rules for `config` (beyond the rules every Config follows): what the provider
    /// does not offer is [`Verdict::Invalid`] with the field named; [`Verdict::Unknown`] when
    /// it cannot tell now (the Config is stored unverified and checked again).
    async fn validate(&self, ctx: &Ctx, config: &Config) -> Verdict;

    /// One step towards `vm` having its machine, given the VM as read (it is wanted, not
    /// paused, and has no machine recorded yet: the handler checked). Records what it did on
    /// the VM with a compare-and-set; [`Next::After`] to look again.
    async fn create(&self, ctx: &Ctx, vm: Versioned<Vm>) -> Result<Next, TaskError>;

    /// One step towards `vm`'s machine being gone, given the VM as read (its machine is the one
    /// the task named, and its removal has started). [`Next::Done`] once it is gone.
    async fn remove(&self, ctx: &Ctx, vm: Vm) -> Result<Next, TaskError>;

    /// Whether `vm`'s machine is up.
    async fn check(&self, ctx: &Ctx, vm: &Vm) -> Result<Health, TaskError>;

    /// Called before a periodic scan of this provider's machines (`inspect_instances`).
    async fn scan_prepare(&self, _ctx: &Ctx) -> Result<(), TaskError> {
        Ok(())
    }

    /// Called after that scan's tasks were pushed.
    async fn scan_cleanup(&self, _ctx: &Ctx) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Types of provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Compute Engine instances, through the process's Compute port.
    Gce,
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

struct Entry {
    provider: Arc<dyn Provider>,
    ready: OnceCell<()>,
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
            };
            by_id.insert(id.clone(), Entry { provider, ready: OnceCell::new() });
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
        self.by_id.insert(id.to_owned(), Entry { provider, ready: OnceCell::new() });
        self
    }

    /// The declared ids, sorted.
    pub fn ids(&self) -> Vec<&str> {
        self.by_id.keys().map(String::as_str).collect()
    }

    /// The id a Config's `provider` field stands for (empty: the default).
    pub fn resolve<'a>(&'a self, named: &'a str) -> &'a str {
        if named.is_empty() { &self.default } else { named }
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
        } else {
            return None;
        };
        Some(ConfigError { field: format!("{}.provider", config.prefix), rule })
    }

    /// The provider with id `id` (empty: the default), set up in this process.
    pub async fn get(&self, ctx: &Ctx, id: &str) -> Result<&Arc<dyn Provider>, TaskError> {
        let id = self.resolve(id);
        let Some(e) = self.by_id.get(id) else {
            let message = format!("not declared in the settings (declared: {})", self.ids().join(", "));
            return Err(TaskError::Provider { id: id.to_owned(), message, transient: false });
        };
        e.ready
            .get_or_try_init(|| async {
                e.provider.setup(ctx).await.map_err(|err| {
                    tracing::error!(provider = %id, error = %err, "provider setup failed; its calls wait for the next try");
                    TaskError::Provider { id: id.to_owned(), message: format!("setup failed: {err}"), transient: true }
                })
            })
            .await?;
        Ok(&e.provider)
    }

    /// Sets up every provider; a failure is logged and leaves the others working.
    pub async fn setup_all(&self, ctx: &Ctx) {
        for id in self.by_id.keys() {
            let _ = self.get(ctx, id).await;
        }
    }
}

/// After a Config was written: when its provider changed (`old` → `new`), every VM of the
/// Config is drained (the old provider's machines go as a shrink's do; the new provider makes
/// their replacements). Returns the drain tasks pushed.
pub async fn switched(ctx: &Ctx, old: Option<&Config>, new: &Config) -> Result<usize, TaskError> {
    let Some(old) = old else { return Ok(0) };
    let (from, to) = (ctx.providers.resolve(&old.provider), ctx.providers.resolve(&new.provider));
    if from == to {
        return Ok(0);
    }
    let ids = ctx.store.vm_ids(crate::ports::store::VmIndex::OfConfig(new.prefix.clone())).await?;
    tracing::info!(config = %new.prefix, from, to, vms = ids.len(), "provider changed: the VMs of the old one are drained");
    let tasks: Vec<crate::tasks::DrainVm> = ids.into_iter().map(|id| crate::tasks::DrainVm { id }).collect();
    ctx.push_many(&tasks).await
}

#[cfg(test)]
mod tests;
