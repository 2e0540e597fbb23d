//! `Ctx`: the ports and settings every handler and cron job gets, and the helpers they share
//! (push, check again later, record an error on a Config's status, whether a Config is paused).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use gce_backend_queues::Task;
use gce_backend_queues::{Engine, Policy, PushOutcome, Queue, QueueSpec, When};
use serde::{Deserialize, Serialize};

use crate::config::Secs;
use crate::error::TaskError;
use crate::model::{ConfigRecord, ErrorEntry, Pause};
use crate::ports::bots::Bots;
use crate::ports::clock::Clock;
use crate::ports::compute::Compute;
use crate::ports::store::{Fence, Store};

/// Timings of the reconcile logic (all overridable in the service settings file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Timing {
    /// How soon a handler looks again at work in progress (a pending operation, a bot not yet
    /// connected, a bot terminating).
    pub watch: Secs,
    /// A bot whose first connection predates its instance by more than this is a previous
    /// incarnation's, and a drained VM whose bot never connected is destroyed after this.
    pub bot_grace: Secs,
    /// Age past which a bot observation from the ListBots walk is not trusted (GetBot instead).
    pub observation_ttl: Secs,
    /// TerminateBot is not sent again for the same bot within this.
    pub terminate_again_after: Secs,
    /// A leaked instance is deleted if still leaked this long after it was first seen.
    pub leak_grace: Secs,
    /// A bot named like ours with no VM is deleted if still there this long after first seen.
    pub stale_bot_grace: Secs,
    /// First backoff of a (project, zone) after a quota or stockout error; doubles per failure.
    pub backoff_base: Secs,
    /// Longest backoff.
    pub backoff_cap: Secs,
    /// Longest wait between two looks at a pending Compute operation: the first look comes
    /// 0.25 s after it was sent, each next one twice as late, up to this.
    pub operation_poll: Secs,
    /// A Config whose file is gone is deleted (and its VMs drained) this long after the file was
    /// first found missing, unless it comes back.
    pub config_delete_grace: Secs,
    /// Every VM's `manage_bot` runs at least once this long (the `manage_bots` sweep, spread
    /// evenly), besides the runs its changes, its deadline and its timeout bring.
    pub sweep: Secs,
    /// The tasks of a scanning cron job (`inspect_instances`, `audit_instances`,
    /// `inspect_swarming`, `report_quota`) are spread over this much time after its tick, so
    /// the scans of many projects, zones and servers do not all call at once (0: no spread).
    pub fan_out_jitter: Secs,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            watch: Secs(10),
            bot_grace: Secs(600),
            observation_ttl: Secs(90),
            terminate_again_after: Secs(3600),
            leak_grace: Secs(900),
            stale_bot_grace: Secs(3600),
            backoff_base: Secs(30),
            backoff_cap: Secs(1800),
            operation_poll: Secs(5),
            config_delete_grace: Secs(900),
            sweep: Secs(4 * 3600),
            fan_out_jitter: Secs(5),
        }
    }
}

/// Guard rails against operator mistakes and floods (settings `[limits]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// The largest amount a Config may ask for (its `max`, and the `max` of each window); above
    /// it the file is invalid and nothing is applied.
    pub max_amount: u32,
    /// `create_vm` tasks one `expand_config` run pushes; it re-queues itself for the rest, so
    /// each batch re-reads the Config.
    pub expand_batch: u32,
    /// VMs of one Config waiting for their instance at once; expansion pauses above it.
    pub creating_per_config: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_amount: 10_000, expand_batch: 500, creating_per_config: 1_000 }
    }
}

impl Limits {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_amount == 0 || self.expand_batch == 0 || self.creating_per_config == 0 {
            return Err("limits: max_amount, expand_batch and creating_per_config must be positive".into());
        }
        Ok(())
    }
}

/// The queues of the pipeline, by name.
#[derive(Debug, Clone)]
pub struct Queues(HashMap<String, Queue>);

impl Queues {
    /// Every pipeline queue on `engine`, with `policies` by queue name (others default).
    pub fn new(engine: Arc<dyn Engine>, policies: &HashMap<String, Policy>) -> Result<Self, TaskError> {
        let mut map = HashMap::new();
        for name in crate::tasks::QUEUES {
            let policy = policies.get(*name).cloned().unwrap_or_default();
            map.insert((*name).to_owned(), Queue::new(engine.clone(), QueueSpec::new(name, policy)?));
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

/// What handlers and cron jobs work with.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Datastore.
    pub store: Arc<dyn Store>,
    /// Compute Engine.
    pub compute: Arc<dyn Compute>,
    /// Swarming.
    pub bots: Arc<dyn Bots>,
    /// The rate-limit buckets Compute calls take from (read here for status).
    pub buckets: Arc<dyn crate::ports::rated::Buckets>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Queues.
    pub queues: Queues,
    /// Timings.
    pub timing: Arc<Timing>,
    /// Guard rails.
    pub limits: Arc<Limits>,
    /// What the settings let Configs name: Swarming servers, and each tenant's prefixes,
    /// projects, service accounts and VMs.
    pub trust: Arc<crate::config::Trust>,
    /// What Compute Engine offers per project (zones, disk types), cached.
    pub catalog: Arc<crate::catalog::Catalog>,
    /// Where machines come from: the declared providers.
    pub providers: Arc<crate::providers::Providers>,
    /// The keys VMs' identity tokens are signed with (Google's, or the simulator's).
    pub keys: Arc<dyn crate::ports::keys::Keys>,
    /// Deployment name: the value of the `gce-backend` label on our instances.
    pub deployment: String,
    /// Where `import_configs` reads Config files.
    pub configs_dir: std::path::PathBuf,
    /// Metrics.
    pub telemetry: crate::telemetry::Telemetry,
    /// Conditions holding tasks back in this process (a backed-off zone, a Swarming server that
    /// cannot be walked), each logged once per change of state with a periodic summary.
    pub episodes: Arc<crate::episodes::Episodes>,
}

impl Ctx {
    /// Checks `config` with its provider (which must be declared): what the provider does not
    /// offer is invalid; a provider that cannot tell now (or is not set up) says unknown.
    pub async fn validate(&self, config: &crate::config::Config) -> crate::catalog::Verdict {
        use crate::catalog::Verdict;
        if let Some(e) = self.providers.problem(config) {
            return Verdict::Invalid(e);
        }
        match self.providers.get(self, &config.provider).await {
            Ok(p) => p.validate(self, config).await,
            Err(e) => Verdict::Unknown(e.to_string()),
        }
    }

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
        while !self.store.lease(ADMISSION, &fence.holder, ADMISSION_LEASE).await.map_err(TaskError::from)? {
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
                    let _ = self.store.renew(ADMISSION, &fence.holder, ADMISSION_LEASE).await;
                }
            }
        };
        // A release that fails is covered by the lease's expiry.
        let _ = self.store.release(ADMISSION, &fence.holder).await;
        out
    }

    /// Now.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Pushes a task at once.
    pub async fn push<T: Task>(&self, task: &T) -> Result<PushOutcome, TaskError> {
        self.push_at(task, When::Now).await
    }

    /// Pushes a task at `when`.
    pub async fn push_at<T: Task>(&self, task: &T, when: When) -> Result<PushOutcome, TaskError> {
        Ok(self.queues.get(T::QUEUE).push(&task.key(), task, when).await?)
    }

    /// Pushes many tasks of one queue; returns how many added work.
    pub async fn push_many<T: Task>(&self, tasks: &[T]) -> Result<usize, TaskError> {
        self.push_group(&tasks.iter().collect::<Vec<_>>(), When::Now).await
    }

    /// Pushes `tasks` (of one queue) at `when`, a thousand per call; returns how many added work.
    async fn push_group<T: Task>(&self, tasks: &[&T], when: When) -> Result<usize, TaskError> {
        let q = self.queues.get(T::QUEUE);
        let mut added = 0;
        for chunk in tasks.chunks(1000) {
            let out = q.push_many(chunk.iter().map(|t| (t.key(), *t)), when).await?;
            added += out.iter().filter(|o| o.added()).count();
        }
        Ok(added)
    }

    /// Pushes a scanning cron job's tasks spread over `timing.fan_out_jitter`: each task at a
    /// random one of ten steps across it (the first at once); returns how many added work.
    pub async fn push_spread<T: Task>(&self, tasks: &[T]) -> Result<usize, TaskError> {
        const STEPS: u64 = 10;
        let over = self.timing.fan_out_jitter.0.saturating_mul(1000);
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
        self.timing.observation_ttl.chrono() * 2
    }

    /// The watch interval.
    pub fn watch(&self) -> Duration {
        Duration::from_secs(self.timing.watch.0.max(1))
    }

    /// How soon to look again for something expected about `since` after it began (a bot after
    /// its instance's creation): half that age, at least 0.5 s and at most [`Ctx::watch`], so the
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
        since.clamp(Duration::from_millis(250), Duration::from_secs(self.timing.operation_poll.0.max(1)))
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
        tracing::warn!(config = %prefix, stage = %stage, code = %code, zone = %zone, "{message}");
        let e = ErrorEntry {
            time: self.now(),
            stage: stage.to_owned(),
            code: code.to_owned(),
            message: message.to_owned(),
            zone: zone.to_owned(),
            operation: operation.to_owned(),
            resolved: None,
        };
        Ok(self.store.push_error(prefix, &e).await?)
    }

    /// One VM. A record that does not decode is quarantined (see
    /// [`crate::tasks::quarantine`]) and reads as absent: the caller has nothing to do.
    pub async fn vm(
        &self,
        id: &str,
    ) -> Result<Option<crate::ports::store::Versioned<crate::model::Vm>>, TaskError> {
        match self.store.vm(id).await {
            Ok(v) => Ok(v),
            Err(crate::ports::store::StoreError::Corrupt { error, version, .. }) => {
                crate::tasks::quarantine(self, id, &error, version).await?;
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
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
        let newest = self.store.errors(prefix).await?.into_iter().next();
        if newest.is_some_and(|e| {
            e.resolved.is_none() && e.stage == stage && e.code == code && e.message == message
        }) {
            tracing::debug!(config = %prefix, stage = %stage, code = %code, "{message}");
            return Ok(());
        }
        self.record(prefix, stage, code, message, "", "").await
    }

    /// The pause in force for `rec`: its own, else the global one. The one rule of pausing:
    /// while paused, `expand_config` and `create_vm` make no VM record, `create_instance` sends
    /// no insert for a VM not yet sent (it waits; resuming pushes it again), and `manage_bot`
    /// does not retire a healthy VM past its deadline. Draining, deleting, cleaning up faulty
    /// VMs (destroyed, not replaced), bot cleanup and audits go on.
    pub async fn paused(&self, rec: &ConfigRecord) -> Result<Option<Pause>, TaskError> {
        self.paused_given(Some(rec)).await
    }

    /// [`Ctx::paused`] for a record that may be missing (then only the global pause counts).
    pub async fn paused_given(&self, rec: Option<&ConfigRecord>) -> Result<Option<Pause>, TaskError> {
        match rec.and_then(|r| r.paused.as_ref()) {
            Some(p) => Ok(Some(p.clone())),
            None => global_pause(&*self.store).await,
        }
    }

    /// Whether making or replacing VMs of `rec` is held: [`Ctx::paused`], or the Config's breaker
    /// is open (for any VM but its canary, when `vm_id` names one).
    pub async fn held(&self, rec: &ConfigRecord, vm_id: Option<&str>) -> Result<Option<Pause>, TaskError> {
        match self.paused(rec).await? {
            Some(p) => Ok(Some(p)),
            None => Ok(crate::breaker::hold(rec, vm_id)),
        }
    }

    /// Whether replacing the VMs of Config `prefix` is held: paused, or its breaker is open (only
    /// the global pause when it has no record, or one that does not decode: that is reported
    /// and repaired by `import_configs`).
    pub async fn paused_of(&self, prefix: &str) -> Result<Option<Pause>, TaskError> {
        match self.store.config(prefix).await {
            Ok(Some(c)) => self.held(&c.value, None).await,
            Ok(None) => self.paused_given(None).await,
            Err(crate::ports::store::StoreError::Corrupt { .. }) => self.paused_given(None).await,
            Err(e) => Err(e.into()),
        }
    }

    /// Marks a Config's errors of `stages` resolved: they succeeded (one write).
    pub async fn resolved(&self, prefix: &str, stages: &[&str]) -> Result<(), TaskError> {
        Ok(self.store.resolve_errors(prefix, stages, self.now()).await?)
    }
}

/// The global pause. A record that does not decode counts as a pause (failing safe: nothing is
/// created until an operator lifts or sets it again), with a WARN.
pub async fn global_pause(store: &dyn Store) -> Result<Option<Pause>, TaskError> {
    match store.global_pause().await {
        Ok(p) => Ok(p),
        Err(crate::ports::store::StoreError::Corrupt { error, .. }) => {
            tracing::warn!(error = %error, "the global pause record does not decode: every Config counts as paused until it is set or lifted again");
            let reason = format!("the global pause record does not decode ({error}); set or lift it again");
            Ok(Some(Pause { by: String::new(), reason, at: DateTime::<Utc>::UNIX_EPOCH }))
        }
        Err(e) => Err(e.into()),
    }
}

/// A deterministic GCE requestId: UUIDv5 of `what` (e.g. `create-<hostname>`), so a retried
/// call is the same call.
pub fn request_id(what: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, what.as_bytes()).to_string()
}
