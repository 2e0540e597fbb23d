//! Providers: where a Config's machines come from. One contract ([`Provider`]), the declared
//! providers of a deployment ([`Providers`], from settings `[providers.<id>]`), and the one
//! place a Config or a VM is matched to its provider.
//!
//! The handlers keep what every provider shares (is the VM still wanted, paused, drained; the
//! bot's life); a provider owns what is its own: checking a Config against what it offers,
//! making and removing one machine (idempotently, at its source), saying whether a machine is
//! up, how a batch of new VMs is sent, whether its zones are scanned, and its per-pool resources
//! with their audit. Nothing outside this module asks which type a provider is. Seed 000
//! (Taskcluster worker-manager's providers) is the model.
//!
//! The work that names no provider (a Config's `bulk_insert`, a zone's scan, a project's audit)
//! goes to each provider once ([`Providers::send_together`], [`Providers::scan_zone`],
//! [`Providers::audit_resources`]): the ids of one type share one provider, whose machines and
//! resources carry the deployment's labels, not an id.

mod contract;
pub mod gce;
mod gce_audit;
pub mod gce_bulk;
pub mod gce_insert;
mod gce_scan;
mod gce_send;
pub mod gce_template;
#[cfg(test)]
mod instant;
mod power;
pub mod static_machines;

pub use contract::{Batch, Health, Proven, Provider};

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::OnceCell;

use crate::config::providers::{Declared, Kind, ProviderIds};
use crate::env::Env;
use crate::error::TaskError;
use crate::work::Next;

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
    declared: ProviderIds,
    by_id: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers").field("declared", &self.declared).finish()
    }
}

impl Default for Providers {
    /// One Compute Engine provider, `gce`.
    fn default() -> Self {
        Self::of(ProviderIds::default())
    }
}

impl Providers {
    /// The providers `declared` in the settings (see [`ProviderIds::new`]).
    pub fn new(declared: &BTreeMap<String, Declared>) -> Result<Self, String> {
        ProviderIds::new(declared).map(Self::of)
    }

    /// The provider of its type for each of `declared` (one per type, shared by its ids).
    fn of(declared: ProviderIds) -> Self {
        let gce: Arc<dyn Provider> = Arc::new(gce::Gce);
        let fixed: Arc<dyn Provider> = Arc::new(static_machines::Static);
        let mut by_id = BTreeMap::new();
        for id in declared.ids() {
            let provider = match declared.kind(id) {
                Some(Kind::Static) => fixed.clone(),
                _ => gce.clone(),
            };
            by_id.insert(id.to_owned(), Entry::new(provider));
        }
        Self { declared, by_id }
    }

    /// These providers and `provider` as `id` (replacing one of that id): a type of provider
    /// that is not declared through settings (tests, embedders).
    pub fn with(mut self, id: &str, provider: Arc<dyn Provider>) -> Self {
        self.declared = self.declared.with(id, provider.kind());
        self.by_id.insert(id.to_owned(), Entry::new(provider));
        self
    }

    /// The declared ids and types (which provider a Config or VM means).
    pub fn declared(&self) -> &ProviderIds {
        &self.declared
    }

    /// The provider with id `id` (empty: the default), set up in this process.
    pub async fn get(&self, ctx: &Env, id: &str) -> Result<&Arc<dyn Provider>, TaskError> {
        let id = self.declared.resolve(id);
        let Some(e) = self.by_id.get(id) else {
            let message =
                format!("not declared in the settings (declared: {})", self.declared.ids().join(", "));
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

    /// Each provider once (one serving several ids, once), set up; one whose setup fails is
    /// left out (its failure is logged by the setup).
    async fn each(&self, ctx: &Env) -> Vec<&Arc<dyn Provider>> {
        let mut out: Vec<&Arc<dyn Provider>> = Vec::new();
        for id in self.by_id.keys() {
            if let Ok(p) = self.get(ctx, id).await
                && !out.iter().any(|q| Arc::ptr_eq(q, p))
            {
                out.push(p);
            }
        }
        out
    }

    /// One step of Config `prefix`'s `bulk_insert`: each provider follows what it sent together,
    /// and the Config's own provider (while the Config is there) sends what its
    /// [`Provider::create_batch`] put together ([`Provider::send_together`]). The sooner next
    /// step of them all; the first failure once all were run.
    pub async fn send_together(&self, ctx: &Env, prefix: &str) -> Result<Next, TaskError> {
        let cfg = ctx.ports.store.config(prefix).await?.map(|c| c.value);
        let own = cfg.as_ref().and_then(|c| self.by_id.get(self.declared.resolve(&c.config.provider)));
        let mut runs = Vec::new();
        for p in self.each(ctx).await {
            let mine = own.is_some_and(|e| Arc::ptr_eq(&e.provider, p));
            runs.push(p.send_together(ctx, &self.declared, prefix, cfg.as_ref().filter(|_| mine)).await);
        }
        sooner_of(runs)
    }

    /// One scan of `zone` in `project` by each provider that scans zones
    /// ([`Provider::scans_zones`], [`Provider::scan_zone`]).
    pub async fn scan_zone(&self, ctx: &Env, project: &str, zone: &str) -> Result<Next, TaskError> {
        let mut runs = Vec::new();
        for p in self.each(ctx).await.into_iter().filter(|p| p.scans_zones()) {
            runs.push(p.scan_zone(ctx, project, zone).await);
        }
        sooner_of(runs)
    }

    /// One audit of the per-pool resources each provider made in `project`
    /// ([`Provider::audit_resources`]).
    pub async fn audit_resources(&self, ctx: &Env, project: &str) -> Result<Next, TaskError> {
        let mut runs = Vec::new();
        for p in self.each(ctx).await {
            runs.push(p.audit_resources(ctx, project).await);
        }
        sooner_of(runs)
    }
}

/// The sooner next step of `runs`, or the first failure among them.
fn sooner_of(runs: Vec<Result<Next, TaskError>>) -> Result<Next, TaskError> {
    runs.into_iter().try_fold(Next::Done, |next, run| run.map(|n| next.sooner(n)))
}

#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod tests;
