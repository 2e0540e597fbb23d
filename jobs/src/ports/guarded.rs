//! The Swarming and Compute ports behind [`Guard`]s: one key per Swarming server and per Compute
//! project, so one that hangs or fails holds a bounded share of the workers and is paused by its
//! breaker, while every other server and project goes on as usual. Every call is measured here:
//! a call that ran by its result code and latency, a call the guard refused by why (`busy`,
//! `circuit_open`, `timeout`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::bots::{BotError, BotErrorKind, BotEvent, Bots};
use super::compute::{
    BulkSpec, Compute, ComputeError, Instance, InstanceSpec, Kind, Operation, Power, Quota, Template,
    TemplateSpec,
};
use super::guard::{Guard, Isolation, Refused};
use crate::metrics::Metrics;
use crate::model::Bot;

/// The label of a guard's refusal.
fn refusal(r: &Refused) -> &'static str {
    match r {
        Refused::Busy(_) => "busy",
        Refused::Open(..) => "circuit_open",
        Refused::Timeout(_) => "timeout",
    }
}

/// Measures `call` as `service` `method`: its result code (`ok` or `code` of the error) and
/// latency (of the call alone, not the wait for a slot).
async fn measured<T, E>(
    metrics: &Metrics,
    service: &'static str,
    method: &'static str,
    code: impl Fn(&E) -> String,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let started = tokio::time::Instant::now();
    let out = call.await;
    let c = match &out {
        Ok(_) => "ok".to_owned(),
        Err(e) => code(e),
    };
    metrics.call(service, method, &c, Some(started.elapsed().as_secs_f64()));
    out
}

/// Swarming, guarded per server.
#[derive(Debug)]
pub struct GuardedBots {
    inner: Arc<dyn Bots>,
    guard: Guard,
    timeout: Duration,
    metrics: Metrics,
}

impl GuardedBots {
    /// `inner` behind a guard with `iso`'s settings.
    pub fn new(inner: Arc<dyn Bots>, iso: &Isolation, metrics: &Metrics) -> Self {
        Self {
            inner,
            guard: Guard::new(iso.calls_per_server, iso),
            timeout: Duration::from_secs(iso.swarming_timeout.0),
            metrics: metrics.clone(),
        }
    }

    async fn run<T>(
        &self,
        method: &'static str,
        server: &str,
        call: impl Future<Output = Result<T, BotError>>,
    ) -> Result<T, BotError> {
        self.run_within(method, server, self.timeout, call).await
    }

    async fn run_within<T>(
        &self,
        method: &'static str,
        server: &str,
        timeout: Duration,
        call: impl Future<Output = Result<T, BotError>>,
    ) -> Result<T, BotError> {
        let call =
            measured(&self.metrics, "swarming", method, |e: &BotError| e.kind.as_str().to_owned(), call);
        self.guard.call(server, timeout, call).await.map_err(|e| match e {
            Ok(e) => e,
            Err(r) => {
                self.metrics.call("swarming", method, refusal(&r), None);
                let e = BotError::new(BotErrorKind::Unavailable, format!("swarming server {server}: {r}"));
                BotError { retry_after: r.wait(), ..e }
            }
        })
    }
}

#[async_trait]
impl Bots for GuardedBots {
    async fn get(&self, server: &str, id: &str) -> Result<Option<Bot>, BotError> {
        self.run("GetBot", server, self.inner.get(server, id)).await
    }

    async fn list(
        &self,
        server: &str,
        cursor: Option<String>,
    ) -> Result<(Vec<Bot>, Option<String>), BotError> {
        // A page of up to 1 000 bots takes longer than one bot.
        self.run_within("ListBots", server, self.timeout * 3, self.inner.list(server, cursor)).await
    }

    async fn events(&self, server: &str, id: &str, start: DateTime<Utc>) -> Result<Vec<BotEvent>, BotError> {
        self.run("ListBotEvents", server, self.inner.events(server, id, start)).await
    }

    async fn terminate(&self, server: &str, id: &str) -> Result<(), BotError> {
        self.run("TerminateBot", server, self.inner.terminate(server, id)).await
    }

    async fn delete(&self, server: &str, id: &str) -> Result<bool, BotError> {
        self.run("DeleteBot", server, self.inner.delete(server, id)).await
    }

    async fn count_pending(
        &self,
        server: &str,
        tags: &[String],
        start: DateTime<Utc>,
    ) -> Result<u32, BotError> {
        self.run("CountTasks", server, self.inner.count_pending(server, tags, start)).await
    }
}

/// Compute, guarded per project.
#[derive(Debug)]
pub struct GuardedCompute {
    inner: Arc<dyn Compute>,
    guard: Guard,
    timeout: Duration,
    metrics: Metrics,
}

impl GuardedCompute {
    /// `inner` behind a guard with `iso`'s settings.
    pub fn new(inner: Arc<dyn Compute>, iso: &Isolation, metrics: &Metrics) -> Self {
        Self {
            inner,
            guard: Guard::new(iso.calls_per_project, iso),
            timeout: Duration::from_secs(iso.compute_timeout.0),
            metrics: metrics.clone(),
        }
    }

    async fn run<T>(
        &self,
        method: &'static str,
        project: &str,
        call: impl Future<Output = Result<T, ComputeError>>,
    ) -> Result<T, ComputeError> {
        let call = measured(&self.metrics, "compute", method, |e: &ComputeError| e.code.clone(), call);
        self.guard.call(project, self.timeout, call).await.map_err(|e| match e {
            Ok(e) => e,
            Err(r) => {
                self.metrics.call("compute", method, refusal(&r), None);
                ComputeError {
                    kind: Kind::Transient,
                    code: if matches!(r, Refused::Timeout(_)) {
                        "timeout".into()
                    } else {
                        "unavailable".into()
                    },
                    message: format!("project {project}: {r}"),
                    retry_after: r.wait(),
                }
            }
        })
    }
}

#[async_trait]
impl Compute for GuardedCompute {
    async fn insert(
        &self,
        project: &str,
        zone: &str,
        request_id: &str,
        spec: &InstanceSpec,
    ) -> Result<Operation, ComputeError> {
        self.run("instances.insert", project, self.inner.insert(project, zone, request_id, spec)).await
    }

    async fn bulk_insert(
        &self,
        project: &str,
        zone: &str,
        request_id: &str,
        spec: &BulkSpec,
    ) -> Result<Operation, ComputeError> {
        self.run("instances.bulkInsert", project, self.inner.bulk_insert(project, zone, request_id, spec))
            .await
    }

    async fn operation(
        &self,
        project: &str,
        zone: &str,
        op: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        self.run("zoneOperations.get", project, self.inner.operation(project, zone, op)).await
    }

    async fn get(&self, project: &str, zone: &str, name: &str) -> Result<Option<Instance>, ComputeError> {
        self.run("instances.get", project, self.inner.get(project, zone, name)).await
    }

    async fn delete(
        &self,
        project: &str,
        zone: &str,
        name: &str,
        request_id: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        self.run("instances.delete", project, self.inner.delete(project, zone, name, request_id)).await
    }

    async fn power(
        &self,
        project: &str,
        zone: &str,
        name: &str,
        power: Power,
        request_id: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        let method = match power {
            Power::Suspend => "instances.suspend",
            Power::Resume => "instances.resume",
            Power::Stop => "instances.stop",
            Power::Start => "instances.start",
        };
        self.run(method, project, self.inner.power(project, zone, name, power, request_id)).await
    }

    async fn list(
        &self,
        project: &str,
        zone: &str,
        filter: &str,
        page: Option<String>,
    ) -> Result<(Vec<Instance>, Option<String>), ComputeError> {
        self.run("instances.list", project, self.inner.list(project, zone, filter, page)).await
    }

    async fn insert_template(
        &self,
        project: &str,
        request_id: &str,
        spec: &TemplateSpec,
    ) -> Result<Operation, ComputeError> {
        self.run("instanceTemplates.insert", project, self.inner.insert_template(project, request_id, spec))
            .await
    }

    async fn template(&self, project: &str, name: &str) -> Result<Option<Template>, ComputeError> {
        self.run("instanceTemplates.get", project, self.inner.template(project, name)).await
    }

    async fn delete_template(
        &self,
        project: &str,
        name: &str,
        request_id: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        self.run("instanceTemplates.delete", project, self.inner.delete_template(project, name, request_id))
            .await
    }

    async fn templates(
        &self,
        project: &str,
        filter: &str,
        page: Option<String>,
    ) -> Result<(Vec<Template>, Option<String>), ComputeError> {
        self.run("instanceTemplates.list", project, self.inner.templates(project, filter, page)).await
    }

    async fn global_operation(&self, project: &str, op: &str) -> Result<Option<Operation>, ComputeError> {
        self.run("globalOperations.get", project, self.inner.global_operation(project, op)).await
    }

    async fn zones(&self, project: &str) -> Result<Vec<String>, ComputeError> {
        self.run("zones.list", project, self.inner.zones(project)).await
    }

    async fn disk_types(&self, project: &str, zone: &str) -> Result<Vec<String>, ComputeError> {
        self.run("diskTypes.list", project, self.inner.disk_types(project, zone)).await
    }

    async fn quotas(&self, project: &str) -> Result<Vec<Quota>, ComputeError> {
        self.run("regions.list", project, self.inner.quotas(project)).await
    }
}

#[cfg(test)]
mod tests;
