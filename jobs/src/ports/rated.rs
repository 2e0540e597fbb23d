//! Rate limits per Compute project and call class: a token bucket for each (project, class),
//! kept in the store so every process of a deployment shares it ([`Buckets`]). A call waits a
//! moment for a token when one comes soon; otherwise it is not sent and the task is looked at
//! again when the token is there ([`Kind::Throttled`]: no worker waits, no attempt is counted,
//! so one throttled project never holds up another). A `rateLimitExceeded` answer halves the
//! bucket's rate, which then grows back by a twentieth of the configured rate per second (AIMD).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::clock::{Clock, SystemClock};
use super::compute::{
    BulkSpec, Compute, ComputeError, Instance, InstanceSpec, Kind, Operation, Power, Quota, Template,
    TemplateSpec,
};
use super::store::StoreError;
use crate::episodes::{Episodes, Held};
use crate::metrics::Metrics;

/// A rate: `rate` tokens per second, at most `burst` saved up (rate 0: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    /// Tokens per second.
    pub rate: f64,
    /// Most tokens saved up.
    pub burst: u32,
}

impl Rate {
    /// 0 (no limit), or a positive rate with a burst of at least 1.
    pub fn validate(&self) -> Result<(), &'static str> {
        if !(self.rate >= 0.0 && self.rate.is_finite()) || (self.rate > 0.0 && self.burst == 0) {
            return Err("rate must be 0 (no limit) or positive, with a burst of at least 1");
        }
        Ok(())
    }
}

/// The classes of Compute calls, each with its own bucket per project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `instances.insert`, `instances.bulkInsert` (one call however many it makes),
    /// `instances.delete`, `suspend`, `resume`, `stop`, `start`, `instanceTemplates.insert`
    /// and `delete`.
    Mutate,
    /// `instances.get`, `instances.list`, `zones.list`, `diskTypes.list`, `regions.list`,
    /// `instanceTemplates.get` and `list`.
    Read,
    /// `zoneOperations.get`, `globalOperations.get`.
    Operations,
    /// `instances.bulkInsert`, which Compute also holds to a rate of its own (20 a second per
    /// project); each also takes a [`Class::Mutate`] token.
    Bulk,
}

impl Class {
    /// Every class.
    pub const ALL: [Class; 4] = [Class::Mutate, Class::Read, Class::Operations, Class::Bulk];

    /// Its name (settings, metrics, bucket keys).
    pub fn name(self) -> &'static str {
        match self {
            Class::Mutate => "mutate",
            Class::Read => "read",
            Class::Operations => "operations",
            Class::Bulk => "bulk",
        }
    }
}

/// One project's rates, over the defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectRates {
    /// Inserts and deletes.
    pub mutate: Option<Rate>,
    /// Reads.
    pub read: Option<Rate>,
    /// Operation polls.
    pub operations: Option<Rate>,
    /// Bulk inserts.
    pub bulk: Option<Rate>,
}

/// Settings `[rate_limits]`: per-class rates for every project, and overrides by project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimits {
    /// Inserts and deletes per project.
    pub mutate: Rate,
    /// Reads per project.
    pub read: Rate,
    /// Operation polls per project.
    pub operations: Rate,
    /// Bulk inserts per project (each also a mutation).
    pub bulk: Rate,
    /// Other rates for some projects (`[rate_limits.projects.<project>]`).
    pub projects: BTreeMap<String, ProjectRates>,
}

impl Default for RateLimits {
    /// No limit (settings without `[rate_limits]`; the shipped settings set Compute Engine's
    /// default per-project quotas).
    fn default() -> Self {
        let none = Rate { rate: 0.0, burst: 1 };
        Self { mutate: none, read: none, operations: none, bulk: none, projects: BTreeMap::new() }
    }
}

impl RateLimits {
    /// The rate of `class` calls to `project`.
    pub fn of(&self, project: &str, class: Class) -> Rate {
        let o = self.projects.get(project);
        let pick = |p: Option<Rate>, d: Rate| p.unwrap_or(d);
        match class {
            Class::Mutate => pick(o.and_then(|o| o.mutate), self.mutate),
            Class::Read => pick(o.and_then(|o| o.read), self.read),
            Class::Operations => pick(o.and_then(|o| o.operations), self.operations),
            Class::Bulk => pick(o.and_then(|o| o.bulk), self.bulk),
        }
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<(), String> {
        // The defaults (no project is named ""), then each project's rates.
        for project in std::iter::once("").chain(self.projects.keys().map(String::as_str)) {
            for class in Class::ALL {
                if let Err(e) = self.of(project, class).validate() {
                    let at = if project.is_empty() { String::new() } else { format!("projects.{project}.") };
                    return Err(format!("rate_limits.{at}{}: {e}", class.name()));
                }
            }
        }
        Ok(())
    }
}

/// Token buckets shared by the processes of a deployment.
#[async_trait]
pub trait Buckets: Send + Sync + std::fmt::Debug {
    /// Takes a token of bucket `key` (filled at up to `rate.rate` per second, at most
    /// `rate.burst` saved): zero when taken, else how long until one is there.
    async fn take(&self, key: &str, rate: Rate) -> Result<Duration, StoreError>;
    /// Compute said its rate limit was exceeded: halve the bucket's rate.
    async fn slow(&self, key: &str, rate: Rate) -> Result<(), StoreError>;
    /// Every bucket used within the last hour.
    async fn levels(&self) -> Result<Vec<Level>, StoreError>;
    /// Takes one of at most `max` places of `key` for `who`, held for `ttl` unless left sooner
    /// (taking it again renews it; a holder that died frees its place when `ttl` ends): true
    /// when `who` holds one. What Compute limits by number at once (bulk operations running).
    async fn enter(&self, key: &str, who: &str, max: u32, ttl: Duration) -> Result<bool, StoreError>;
    /// Gives `who`'s place of `key` back (none held: nothing to do).
    async fn leave(&self, key: &str, who: &str) -> Result<(), StoreError>;
    /// How many places of `key` are held (a look only: [`Buckets::enter`] decides).
    async fn holders(&self, key: &str) -> Result<u32, StoreError>;
}

/// A bucket as operators see it (what `status` and `/metrics` show of its saturation).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Level {
    /// The project.
    #[serde(default)]
    pub project: String,
    /// The class of calls (`mutate`, `read`, `operations`, `bulk`).
    #[serde(default)]
    pub class: String,
    /// Calls per second set (`[rate_limits]`).
    pub configured: f64,
    /// Most tokens saved up.
    pub burst: u32,
    /// Calls per second now: lower than `configured` after a `rateLimitExceeded`, growing back.
    pub rate: f64,
    /// Tokens left at its last call.
    pub tokens: f64,
    /// Takes that found no token: a call that waited counts once per wait, a call sent back
    /// for later once more each time it comes back and finds none.
    pub waits: u64,
    /// When a call last found no token.
    pub last_wait: Option<chrono::DateTime<chrono::Utc>>,
    /// `rateLimitExceeded` answers that halved its rate.
    pub slowed: u64,
    /// When the last one came.
    pub last_slowed: Option<chrono::DateTime<chrono::Utc>>,
    /// True while calls found no token within the last minute (set by `status`).
    #[serde(default)]
    pub saturated: bool,
}

impl Level {
    /// A level read from `key` (`project/class`).
    pub fn of_key(key: &str, mut level: Level) -> Level {
        let (project, class) = key.rsplit_once('/').unwrap_or((key, ""));
        (level.project, level.class) = (project.to_owned(), class.to_owned());
        level
    }
}

/// A time in ms since the epoch (0: never).
fn at(ms: u64) -> Option<chrono::DateTime<chrono::Utc>> {
    (ms > 0).then(|| chrono::DateTime::from_timestamp_millis(ms as i64)).flatten()
}

/// A bucket's state: tokens, when it was last filled (ms), its rate now, and how often (and
/// when last, in ms) a call found it empty or Compute slowed it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bucket {
    /// Tokens saved.
    pub tokens: f64,
    /// When last filled, in ms.
    pub at_ms: u64,
    /// The rate now (at most the configured one).
    pub rate: f64,
    /// Calls that found no token.
    pub waits: u64,
    /// When the last one did, in ms.
    pub waited_ms: u64,
    /// Times it was slowed.
    pub slowed: u64,
    /// When last, in ms.
    pub slowed_ms: u64,
}

impl Bucket {
    /// The one rule (the Redis script mirrors it): fill since `at_ms` at the current rate, the
    /// rate growing back by a twentieth of `cfg.rate` per second; then `slow` halves the rate
    /// (no lower than a twentieth) and empties the bucket, or a take takes a token if there is
    /// one. Returns the new state and the wait (zero: taken).
    pub fn step(prev: Option<Bucket>, now_ms: u64, cfg: Rate, slow: bool) -> (Bucket, Duration) {
        let burst = f64::from(cfg.burst);
        let b = prev.unwrap_or(Bucket { tokens: burst, at_ms: now_ms, rate: cfg.rate, ..Bucket::default() });
        let dt = now_ms.saturating_sub(b.at_ms) as f64 / 1000.0;
        let rate = (b.rate + cfg.rate / 20.0 * dt).min(cfg.rate);
        let mut next = Bucket { tokens: (b.tokens + rate * dt).min(burst), at_ms: now_ms, rate, ..b };
        if slow {
            next.rate = (rate / 2.0).max(cfg.rate / 20.0);
            next.tokens = next.tokens.min(0.0);
            (next.slowed, next.slowed_ms) = (next.slowed + 1, now_ms);
            return (next, Duration::ZERO);
        }
        if next.tokens >= 1.0 {
            next.tokens -= 1.0;
            return (next, Duration::ZERO);
        }
        (next.waits, next.waited_ms) = (next.waits + 1, now_ms);
        let wait_ms = ((1.0 - next.tokens) * 1000.0 / next.rate).ceil().max(1.0);
        (next, Duration::from_millis(wait_ms as u64))
    }

    /// What operators see of it, set to `cfg`.
    pub fn level(&self, cfg: Rate) -> Level {
        Level {
            configured: cfg.rate,
            burst: cfg.burst,
            rate: self.rate,
            tokens: self.tokens,
            waits: self.waits,
            last_wait: at(self.waited_ms),
            slowed: self.slowed,
            last_slowed: at(self.slowed_ms),
            ..Level::default()
        }
    }
}

/// Milliseconds since the epoch, by `clock`.
fn now_ms(clock: &dyn Clock) -> u64 {
    u64::try_from(clock.now().timestamp_millis()).unwrap_or(0)
}

/// In-process buckets (the embedded default, tests).
#[derive(Debug)]
pub struct MemoryBuckets {
    buckets: std::sync::Mutex<BTreeMap<String, (Bucket, Rate)>>,
    /// Places: key → holder → until (ms).
    places: std::sync::Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
    clock: Arc<dyn Clock>,
}

impl Default for MemoryBuckets {
    /// Buckets on the system clock.
    fn default() -> Self {
        Self::new(Arc::new(SystemClock))
    }
}

impl MemoryBuckets {
    /// Empty buckets whose tokens come back as `clock` moves.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self { buckets: std::sync::Mutex::default(), places: std::sync::Mutex::default(), clock }
    }

    fn step(&self, key: &str, cfg: Rate, slow: bool) -> Duration {
        let mut m = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let (b, wait) = Bucket::step(m.get(key).map(|(b, _)| *b), now_ms(&*self.clock), cfg, slow);
        m.insert(key.to_owned(), (b, cfg));
        wait
    }
}

#[async_trait]
impl Buckets for MemoryBuckets {
    async fn take(&self, key: &str, rate: Rate) -> Result<Duration, StoreError> {
        Ok(self.step(key, rate, false))
    }
    async fn slow(&self, key: &str, rate: Rate) -> Result<(), StoreError> {
        self.step(key, rate, true);
        Ok(())
    }
    async fn levels(&self) -> Result<Vec<Level>, StoreError> {
        // As in Redis, a bucket unused for an hour is gone.
        let hour_ago = now_ms(&*self.clock).saturating_sub(3_600_000);
        let mut m = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, (b, _)| b.at_ms >= hour_ago);
        Ok(m.iter().map(|(k, (b, cfg))| Level::of_key(k, b.level(*cfg))).collect())
    }
    async fn enter(&self, key: &str, who: &str, max: u32, ttl: Duration) -> Result<bool, StoreError> {
        let now = now_ms(&*self.clock);
        let mut m = self.places.lock().unwrap_or_else(|e| e.into_inner());
        let held = m.entry(key.to_owned()).or_default();
        held.retain(|_, until| *until > now);
        if !held.contains_key(who) && held.len() >= max as usize {
            return Ok(false);
        }
        held.insert(who.to_owned(), now.saturating_add(ttl.as_millis() as u64));
        Ok(true)
    }
    async fn leave(&self, key: &str, who: &str) -> Result<(), StoreError> {
        let mut m = self.places.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = m.get_mut(key) {
            held.remove(who);
        }
        Ok(())
    }
    async fn holders(&self, key: &str) -> Result<u32, StoreError> {
        let now = now_ms(&*self.clock);
        let m = self.places.lock().unwrap_or_else(|e| e.into_inner());
        Ok(m.get(key).map_or(0, |held| held.values().filter(|until| **until > now).count() as u32))
    }
}

/// Longest a call waits for a token in its worker; a longer wait sends the task back.
const SHORT: Duration = Duration::from_millis(250);

/// Compute, rate-limited per project and class.
#[derive(Debug)]
pub struct RatedCompute {
    inner: Arc<dyn Compute>,
    buckets: Arc<dyn Buckets>,
    limits: RateLimits,
    metrics: Metrics,
    held: Episodes,
}

impl RatedCompute {
    /// `inner` behind `limits`, its buckets in `buckets`.
    pub fn new(inner: Arc<dyn Compute>, buckets: Arc<dyn Buckets>, limits: RateLimits, t: &Metrics) -> Self {
        Self { inner, buckets, limits, metrics: t.clone(), held: Episodes::default() }
    }

    async fn run<T>(
        &self,
        class: Class,
        project: &str,
        call: impl Future<Output = Result<T, ComputeError>>,
    ) -> Result<T, ComputeError> {
        let rate = self.limits.of(project, class);
        if rate.rate <= 0.0 {
            return call.await;
        }
        let key = format!("{project}/{}", class.name());
        let mut waited = Duration::ZERO;
        loop {
            match self.buckets.take(&key, rate).await {
                Ok(w) if w.is_zero() => break,
                Ok(w) if waited + w <= SHORT => {
                    tokio::time::sleep(w).await;
                    waited += w;
                }
                Ok(w) => {
                    self.metrics.throttled(project, class.name());
                    let class = class.name();
                    // Said once when it first happens, then summed up every minute it goes on.
                    match self.held.held(&key, tokio::time::Instant::now()) {
                        Held::Began => {
                            tracing::info!(
                                project,
                                class,
                                "rate limit reached: calls held back until tokens come"
                            )
                        }
                        Held::Summary { held, over } => {
                            tracing::info!(project, class, over = ?over, "rate limit reached: {held} calls held back")
                        }
                        Held::Quiet => {
                            tracing::debug!(project, class, wait = ?w, "call held back: rate limit")
                        }
                    }
                    return Err(ComputeError::throttled(project, class, w));
                }
                Err(e) => {
                    // The shared buckets are away: calls go on (the store's own failures slow
                    // the tasks down anyway).
                    tracing::debug!(project, error = %e, "rate limit not applied: buckets unavailable");
                    break;
                }
            }
        }
        let out = call.await;
        if let Err(e) = &out
            && e.kind == Kind::RateLimited
        {
            let _ = self.buckets.slow(&key, rate).await;
        }
        out
    }
}

#[async_trait]
impl Compute for RatedCompute {
    async fn insert(
        &self,
        p: &str,
        z: &str,
        rid: &str,
        spec: &InstanceSpec,
    ) -> Result<Operation, ComputeError> {
        self.run(Class::Mutate, p, self.inner.insert(p, z, rid, spec)).await
    }
    /// One call, as Compute counts it, however many instances it makes.
    async fn bulk_insert(
        &self,
        p: &str,
        z: &str,
        rid: &str,
        spec: &BulkSpec,
    ) -> Result<Operation, ComputeError> {
        let mutation = self.run(Class::Mutate, p, self.inner.bulk_insert(p, z, rid, spec));
        self.run(Class::Bulk, p, mutation).await
    }
    async fn operation(&self, p: &str, z: &str, op: &str) -> Result<Option<Operation>, ComputeError> {
        self.run(Class::Operations, p, self.inner.operation(p, z, op)).await
    }
    async fn get(&self, p: &str, z: &str, name: &str) -> Result<Option<Instance>, ComputeError> {
        self.run(Class::Read, p, self.inner.get(p, z, name)).await
    }
    async fn delete(
        &self,
        p: &str,
        z: &str,
        name: &str,
        rid: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        self.run(Class::Mutate, p, self.inner.delete(p, z, name, rid)).await
    }
    async fn power(
        &self,
        p: &str,
        z: &str,
        name: &str,
        power: Power,
        rid: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        self.run(Class::Mutate, p, self.inner.power(p, z, name, power, rid)).await
    }
    async fn list(
        &self,
        p: &str,
        z: &str,
        filter: &str,
        page: Option<String>,
    ) -> Result<(Vec<Instance>, Option<String>), ComputeError> {
        self.run(Class::Read, p, self.inner.list(p, z, filter, page)).await
    }
    async fn insert_template(
        &self,
        p: &str,
        rid: &str,
        spec: &TemplateSpec,
    ) -> Result<Operation, ComputeError> {
        self.run(Class::Mutate, p, self.inner.insert_template(p, rid, spec)).await
    }
    async fn template(&self, p: &str, name: &str) -> Result<Option<Template>, ComputeError> {
        self.run(Class::Read, p, self.inner.template(p, name)).await
    }
    async fn delete_template(
        &self,
        p: &str,
        name: &str,
        rid: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        self.run(Class::Mutate, p, self.inner.delete_template(p, name, rid)).await
    }
    async fn templates(
        &self,
        p: &str,
        filter: &str,
        page: Option<String>,
    ) -> Result<(Vec<Template>, Option<String>), ComputeError> {
        self.run(Class::Read, p, self.inner.templates(p, filter, page)).await
    }
    async fn global_operation(&self, p: &str, op: &str) -> Result<Option<Operation>, ComputeError> {
        self.run(Class::Operations, p, self.inner.global_operation(p, op)).await
    }
    async fn zones(&self, p: &str) -> Result<Vec<String>, ComputeError> {
        self.run(Class::Read, p, self.inner.zones(p)).await
    }
    async fn disk_types(&self, p: &str, z: &str) -> Result<Vec<String>, ComputeError> {
        self.run(Class::Read, p, self.inner.disk_types(p, z)).await
    }
    async fn quotas(&self, p: &str) -> Result<Vec<Quota>, ComputeError> {
        self.run(Class::Read, p, self.inner.quotas(p)).await
    }
}

#[cfg(test)]
mod tests;
