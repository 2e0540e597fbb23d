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

use super::buckets::{Buckets, Rate};
use super::compute::{
    BulkSpec, Compute, ComputeError, Instance, InstanceSpec, Kind, Operation, Power, Quota, Template,
    TemplateSpec,
};
use crate::metrics::Metrics;
use crate::{episodes::Episodes, episodes::Held};

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
