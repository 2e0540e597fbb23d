//! `Env`: what the reconcile logic works with, in three parts: [`Ports`] (the side effects:
//! store, Compute Engine, Swarming, clock, keys, prices), [`Settings`] (what the service was
//! started with) and the state the machinery shares in this process (queues, the catalog,
//! metrics, episodes); and what every piece of it does through them (push a task, look again
//! later, record an error on a Config's status or an action in the audit trail, take the
//! admission lease). Handlers get it inside their [`crate::ctx::Ctx`] and name the ports they
//! use in their first lines.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use gce_backend_queues::Task;
use gce_backend_queues::{Engine, Policy, PushOutcome, Queue, QueueSpec, When};

use crate::config::{Limits, Timing};
use crate::error::TaskError;
use crate::model::{ErrorEntry, Vm};
use crate::ports::bots::Bots;
use crate::ports::clock::Clock;
use crate::ports::compute::Compute;
use crate::ports::store::{Fence, Store};

/// The queues of the pipeline, by name.
#[derive(Debug, Clone)]
pub struct Queues(HashMap<String, Queue>);

impl Queues {
    /// The queues `names` (the registry's list) on `engine`, with `policies` by queue name
    /// (others default).
    pub fn new(
        engine: Arc<dyn Engine>,
        names: &[&str],
        policies: &HashMap<String, Policy>,
    ) -> Result<Self, TaskError> {
        let mut map = HashMap::new();
        for name in names {
            let policy = policies.get(*name).cloned().unwrap_or_default();
            let spec = QueueSpec::new(name, policy)?.partitioned(crate::work::partitions(name))?;
            map.insert((*name).to_owned(), Queue::new(engine.clone(), spec));
        }
        Ok(Self(map))
    }

    /// The same queues, each calling `hook` for the tasks that go to its dead set.
    pub fn with_dead_hook(self, hook: gce_backend_queues::DeadHook) -> Self {
        Self(self.0.into_iter().map(|(name, q)| (name, q.with_dead_hook(hook.clone()))).collect())
    }

    /// The same queues, their workers' runs measured in `metrics`.
    pub fn with_metrics(self, metrics: &gce_backend_queues::QueueMetrics) -> Self {
        Self(self.0.into_iter().map(|(name, q)| (name, q.with_metrics(metrics.clone()))).collect())
    }

    /// The queue named `name`.
    pub fn get(&self, name: &str) -> &Queue {
        &self.0[name]
    }
}

/// The claim that makes Config admission (the across-Configs prefix rule, then the write) one
/// at a time across processes, so two clashing prefixes cannot both be admitted.
pub(crate) const ADMISSION: &str = "config-admission";
/// How long the admission lease lasts unless renewed: a holder that dies (kill -9, a lost
/// network) stops blocking admissions after this.
pub(crate) const ADMISSION_LEASE: Duration = Duration::from_secs(3);
/// How often a holder renews it while it works.
const ADMISSION_RENEW: Duration = Duration::from_secs(1);
/// Longest a caller waits for it.
const ADMISSION_WAIT: Duration = Duration::from_secs(10);

/// The side effects: what the reconcile logic reads and changes outside itself. A handler
/// names the ones it uses in its first lines (`let Ports { store, compute, .. } = &ctx.ports;`).
#[derive(Debug, Clone)]
pub struct Ports {
    /// Datastore.
    pub store: Arc<dyn Store>,
    /// Compute Engine.
    pub compute: Arc<dyn Compute>,
    /// Swarming.
    pub bots: Arc<dyn Bots>,
    /// The rate-limit buckets Compute calls take from (read here for status).
    pub buckets: Arc<dyn crate::ports::buckets::Buckets>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The keys VMs' identity tokens are signed with (Google's, or the simulator's).
    pub keys: Arc<dyn crate::ports::keys::Keys>,
    /// Compute Engine's SKUs (the Cloud Billing Catalog API, or the simulator's).
    pub prices: Arc<dyn crate::ports::prices::PriceSource>,
}

/// What the service was started with: read, never changed while it runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Timings.
    pub timing: Arc<Timing>,
    /// Guard rails.
    pub limits: Arc<Limits>,
    /// What the settings let Configs name: Swarming servers, and each tenant's prefixes,
    /// projects, service accounts and VMs.
    pub trust: Arc<crate::config::Trust>,
    /// Deployment name: the value of the `gce-backend` label on our instances.
    pub deployment: String,
    /// Where `import_configs` reads Config files.
    pub configs_dir: std::path::PathBuf,
}

/// What every handler, cron job and shared piece of machinery works with: the [`Ports`], the
/// [`Settings`], and the state the machinery shares in this process (queues, caches, metrics).
#[derive(Debug, Clone)]
pub struct Env {
    /// The side effects.
    pub ports: Ports,
    /// What the service was started with.
    pub settings: Settings,
    /// Queues.
    pub queues: Queues,
    /// What Compute Engine offers per project (zones, disk types), cached.
    pub catalog: Arc<crate::catalog::Catalog>,
    /// Metrics.
    pub metrics: crate::metrics::Metrics,
    /// Conditions holding tasks back in this process (a backed-off zone, a Swarming server that
    /// cannot be walked), each logged once per change of state with a periodic summary.
    pub episodes: Arc<crate::episodes::Episodes>,
}

impl Env {
    /// Runs `f` holding the admission lease: the Config writes that may add a prefix (an API
    /// apply, a file's new Config) check the across-Configs rules and write under it, each
    /// write fenced by the lease ([`Store::put_config_fenced`]). The lease is renewed while `f`
    /// runs; should this process stall past it and another take it, `f`'s write finds the fence
    /// gone and writes nothing (it is never cancelled halfway).
    pub async fn admitting<T, E: From<TaskError>>(
        &self,
        f: impl AsyncFnOnce(&Fence) -> Result<T, E>,
    ) -> Result<T, E> {
        let fence = Fence { key: ADMISSION.to_owned(), holder: format!("{:032x}", rand::random::<u128>()) };
        let step = Duration::from_millis(20);
        let mut waited = Duration::ZERO;
        while !self
            .ports
            .store
            .lease(ADMISSION, &fence.holder, ADMISSION_LEASE)
            .await
            .map_err(TaskError::from)?
        {
            if waited >= ADMISSION_WAIT {
                return Err(TaskError::Conflict(
                    "config admission (another apply or import holds it)".into(),
                )
                .into());
            }
            // Waiting for another process: wall time, not the Clock's.
            tokio::time::sleep(step).await;
            waited += step;
        }
        let work = f(&fence);
        let mut work = std::pin::pin!(work);
        let out = loop {
            tokio::select! {
                out = &mut work => break out,
                () = tokio::time::sleep(ADMISSION_RENEW) => {
                    // Renewed only while held: a lapsed lease stays lapsed, and the fence then
                    // refuses the write.
                    let _ = self.ports.store.renew(ADMISSION, &fence.holder, ADMISSION_LEASE).await;
                }
            }
        };
        // A release that fails is covered by the lease's expiry.
        let _ = self.ports.store.release(ADMISSION, &fence.holder).await;
        out
    }

    /// Now.
    pub fn now(&self) -> DateTime<Utc> {
        self.ports.clock.now()
    }

    /// Pushes a task at once.
    pub async fn push<T: Task>(&self, task: &T) -> Result<PushOutcome, TaskError> {
        self.push_at(task, When::Now).await
    }

    /// Pushes a task at `when`.
    pub async fn push_at<T: Task>(&self, task: &T, when: When) -> Result<PushOutcome, TaskError> {
        Ok(self.queues.get(T::QUEUE).push(&task.key(), &crate::unknown::Wire(task), when).await?)
    }

    /// Pushes many tasks of one queue; returns how many added work.
    pub async fn push_many<T: Task>(&self, tasks: &[T]) -> Result<usize, TaskError> {
        self.push_many_at(tasks, When::Now).await
    }

    /// Pushes many tasks of one queue at `when`; returns how many added work.
    pub async fn push_many_at<T: Task>(&self, tasks: &[T], when: When) -> Result<usize, TaskError> {
        self.push_group(&tasks.iter().collect::<Vec<_>>(), when).await
    }

    /// Pushes `tasks` (of one queue) at `when`, a thousand per call; returns how many added work.
    async fn push_group<T: Task>(&self, tasks: &[&T], when: When) -> Result<usize, TaskError> {
        let q = self.queues.get(T::QUEUE);
        let mut added = 0;
        for chunk in tasks.chunks(1000) {
            let wired: Vec<_> = chunk.iter().map(|t| crate::unknown::Wire(*t)).collect();
            let out = q.push_many(chunk.iter().zip(&wired).map(|(t, w)| (t.key(), w)), when).await?;
            added += out.iter().filter(|o| o.added()).count();
        }
        Ok(added)
    }

    /// Pushes a scanning cron job's tasks spread over `timing.fan_out_jitter`: each task at a
    /// random one of ten steps across it (the first at once); returns how many added work.
    pub async fn push_spread<T: Task>(&self, tasks: &[T]) -> Result<usize, TaskError> {
        const STEPS: u64 = 10;
        let over = self.settings.timing.fan_out_jitter.0.saturating_mul(1000);
        if over == 0 || tasks.len() < 2 {
            return self.push_many(tasks).await;
        }
        let mut steps: Vec<Vec<&T>> = (0..STEPS).map(|_| Vec::new()).collect();
        for t in tasks {
            steps[rand::random_range(0..STEPS) as usize].push(t);
        }
        let mut added = 0;
        for (i, step) in steps.iter().enumerate().filter(|(_, s)| !s.is_empty()) {
            let when = match i as u64 * over / STEPS {
                0 => When::Now,
                ms => When::After(Duration::from_millis(ms)),
            };
            added += self.push_group(step, when).await?;
        }
        Ok(added)
    }

    /// How long a bot may stay out of contact before `manage_bot` asks Compute about its
    /// instance: twice `observation_ttl`.
    pub fn silent_after(&self) -> chrono::Duration {
        self.settings.timing.observation_ttl.chrono() * 2
    }

    /// The watch interval.
    pub fn watch(&self) -> Duration {
        Duration::from_secs(self.settings.timing.watch.0.max(1))
    }

    /// How soon to look again for something expected about `since` after it began (a bot after
    /// its instance's creation): half that age, at least 0.5 s and at most [`Env::watch`], so the
    /// first looks come soon after boot and then back off.
    pub fn look_again(&self, since: chrono::Duration) -> Duration {
        let half = Duration::from_millis((since.num_milliseconds().max(0) / 2) as u64);
        half.clamp(Duration::from_millis(500), self.watch())
    }

    /// How soon to look again at a Compute operation sent `since` ago: as long again (so the
    /// looks double), at least 0.25 s and at most `timing.operation_poll`. No worker waits
    /// for an operation: the task goes back to its queue in between.
    pub fn operation_poll(&self, since: chrono::Duration) -> Duration {
        let since = Duration::from_millis(since.num_milliseconds().max(0) as u64);
        since.clamp(
            Duration::from_millis(250),
            Duration::from_secs(self.settings.timing.operation_poll.0.max(1)),
        )
    }

    /// Adds `e` to the audit trail (of its Config, or the global list), keeping the newest
    /// `limits.audit_keep`. Called by the operation that made the change, once it is made; the
    /// change stands if the store fails here (said at WARN, never undone).
    pub async fn audit(&self, e: crate::model::AuditEntry) {
        if let Err(err) = self.ports.store.push_audit(&e, self.settings.limits.audit_keep as usize).await {
            tracing::warn!(config = %e.prefix, actor = %e.actor, action = ?e.action, error = %err, "the audit trail could not record this action");
        }
    }

    /// Records an error on a Config's status.
    pub async fn record(
        &self,
        prefix: &str,
        stage: &str,
        code: &str,
        message: &str,
        zone: &str,
        operation: &str,
    ) -> Result<(), TaskError> {
        self.push_error(prefix, None, stage, code, message, zone, operation).await
    }

    /// Records an error about `vm` on its Config's status (naming the VM and its zone).
    pub async fn record_vm(
        &self,
        vm: &Vm,
        stage: &str,
        code: &str,
        message: &str,
        operation: &str,
    ) -> Result<(), TaskError> {
        self.push_error(&vm.config, Some(&vm.id), stage, code, message, vm.zone(), operation).await
    }

    /// Logs and records one error on a Config's status.
    #[allow(clippy::too_many_arguments)]
    async fn push_error(
        &self,
        prefix: &str,
        vm: Option<&str>,
        stage: &str,
        code: &str,
        message: &str,
        zone: &str,
        operation: &str,
    ) -> Result<(), TaskError> {
        tracing::warn!(config = %prefix, vm = vm.unwrap_or_default(), stage = %stage, code = %code, zone = %zone, "{message}");
        let e = ErrorEntry {
            unknown: Default::default(),
            time: self.now(),
            stage: stage.to_owned(),
            code: code.to_owned(),
            message: message.to_owned(),
            zone: zone.to_owned(),
            operation: operation.to_owned(),
            resolved: None,
            vm: vm.map(str::to_owned),
        };
        Ok(self.ports.store.push_error(prefix, &e).await?)
    }

    /// Records an error on a Config's status unless the newest one already says the same and
    /// is not resolved (for a problem found again on every tick): logged at WARN when recorded,
    /// at DEBUG when found again (a fact is said once).
    pub async fn record_once(
        &self,
        prefix: &str,
        stage: &str,
        code: &str,
        message: &str,
    ) -> Result<(), TaskError> {
        let newest = self.ports.store.errors(prefix).await?.into_iter().next();
        if newest.is_some_and(|e| {
            // The same fault again: Compute's count of answers within an attempt aside.
            use crate::ports::compute::ComputeError;
            let same = ComputeError::without_count(&e.message) == ComputeError::without_count(message);
            e.resolved.is_none() && e.stage == stage && e.code == code && same
        }) {
            tracing::debug!(config = %prefix, stage = %stage, code = %code, "{message}");
            return Ok(());
        }
        self.record(prefix, stage, code, message, "", "").await
    }

    /// Marks a Config's errors of `stages` resolved: they succeeded (one write).
    pub async fn resolved(&self, prefix: &str, stages: &[&str]) -> Result<(), TaskError> {
        Ok(self.ports.store.resolve_errors(prefix, stages, self.now()).await?)
    }
}

/// A deterministic GCE requestId: UUIDv5 of `what` (e.g. `create-<hostname>`), so a retried
/// call is the same call.
pub fn request_id(what: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, what.as_bytes()).to_string()
}

#[cfg(test)]
mod tests;
