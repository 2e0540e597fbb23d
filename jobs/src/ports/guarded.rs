//! The Swarming and Compute ports behind [`Guard`]s: one key per Swarming server and per Compute
//! project, so one that hangs or fails holds a bounded share of the workers and is paused by its
//! breaker, while every other server and project goes on as usual.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::bots::{BotError, BotErrorKind, BotEvent, Bots};
use super::compute::{Compute, ComputeError, Instance, InstanceSpec, Kind, Operation, Quota};
use super::guard::{Guard, Isolation, Refused};
use crate::model::Bot;

/// Swarming, guarded per server.
#[derive(Debug)]
pub struct GuardedBots {
    inner: Arc<dyn Bots>,
    guard: Guard,
    timeout: Duration,
}

impl GuardedBots {
    /// `inner` behind a guard with `iso`'s settings.
    pub fn new(inner: Arc<dyn Bots>, iso: &Isolation) -> Self {
        Self {
            inner,
            guard: Guard::new(iso.calls_per_server, iso),
            timeout: Duration::from_secs(iso.swarming_timeout.0),
        }
    }

    async fn run<T>(
        &self,
        server: &str,
        call: impl Future<Output = Result<T, BotError>>,
    ) -> Result<T, BotError> {
        self.run_within(server, self.timeout, call).await
    }

    async fn run_within<T>(
        &self,
        server: &str,
        timeout: Duration,
        call: impl Future<Output = Result<T, BotError>>,
    ) -> Result<T, BotError> {
        self.guard.call(server, timeout, call).await.map_err(|e| match e {
            Ok(e) => e,
            Err(r) => BotError::new(BotErrorKind::Unavailable, format!("swarming server {server}: {r}")),
        })
    }
}

#[async_trait]
impl Bots for GuardedBots {
    async fn get(&self, server: &str, id: &str) -> Result<Option<Bot>, BotError> {
        self.run(server, self.inner.get(server, id)).await
    }

    async fn list(
        &self,
        server: &str,
        cursor: Option<String>,
    ) -> Result<(Vec<Bot>, Option<String>), BotError> {
        // A page of up to 1 000 bots takes longer than one bot.
        self.run_within(server, self.timeout * 3, self.inner.list(server, cursor)).await
    }

    async fn events(&self, server: &str, id: &str, start: DateTime<Utc>) -> Result<Vec<BotEvent>, BotError> {
        self.run(server, self.inner.events(server, id, start)).await
    }

    async fn terminate(&self, server: &str, id: &str) -> Result<(), BotError> {
        self.run(server, self.inner.terminate(server, id)).await
    }

    async fn delete(&self, server: &str, id: &str) -> Result<bool, BotError> {
        self.run(server, self.inner.delete(server, id)).await
    }
}

/// Compute, guarded per project.
#[derive(Debug)]
pub struct GuardedCompute {
    inner: Arc<dyn Compute>,
    guard: Guard,
    timeout: Duration,
    wait_timeout: Duration,
}

impl GuardedCompute {
    /// `inner` behind a guard with `iso`'s settings.
    pub fn new(inner: Arc<dyn Compute>, iso: &Isolation) -> Self {
        Self {
            inner,
            guard: Guard::new(iso.calls_per_project, iso),
            timeout: Duration::from_secs(iso.compute_timeout.0),
            wait_timeout: Duration::from_secs(iso.wait_timeout.0),
        }
    }

    async fn run<T>(
        &self,
        project: &str,
        timeout: Duration,
        call: impl Future<Output = Result<T, ComputeError>>,
    ) -> Result<T, ComputeError> {
        self.guard.call(project, timeout, call).await.map_err(|e| match e {
            Ok(e) => e,
            Err(r) => ComputeError {
                kind: Kind::Transient,
                code: if matches!(r, Refused::Timeout(_)) { "timeout".into() } else { "unavailable".into() },
                message: format!("project {project}: {r}"),
            },
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
        self.run(project, self.timeout, self.inner.insert(project, zone, request_id, spec)).await
    }

    async fn wait(&self, project: &str, zone: &str, operation: &str) -> Result<Operation, ComputeError> {
        // Waiting is what this call is for: it takes no slot of the project, only a timeout.
        match tokio::time::timeout(self.wait_timeout, self.inner.wait(project, zone, operation)).await {
            Ok(r) => r,
            Err(_) => Err(ComputeError {
                kind: Kind::Transient,
                code: "timeout".into(),
                message: format!(
                    "project {project}: zoneOperations.wait gave no answer within {:?}",
                    self.wait_timeout
                ),
            }),
        }
    }

    async fn get(&self, project: &str, zone: &str, name: &str) -> Result<Option<Instance>, ComputeError> {
        self.run(project, self.timeout, self.inner.get(project, zone, name)).await
    }

    async fn delete(
        &self,
        project: &str,
        zone: &str,
        name: &str,
        request_id: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        self.run(project, self.timeout, self.inner.delete(project, zone, name, request_id)).await
    }

    async fn list(
        &self,
        project: &str,
        zone: &str,
        filter: &str,
        page: Option<String>,
    ) -> Result<(Vec<Instance>, Option<String>), ComputeError> {
        self.run(project, self.timeout, self.inner.list(project, zone, filter, page)).await
    }

    async fn zones(&self, project: &str) -> Result<Vec<String>, ComputeError> {
        self.run(project, self.timeout, self.inner.zones(project)).await
    }

    async fn disk_types(&self, project: &str, zone: &str) -> Result<Vec<String>, ComputeError> {
        self.run(project, self.timeout, self.inner.disk_types(project, zone)).await
    }

    async fn quotas(&self, project: &str) -> Result<Vec<Quota>, ComputeError> {
        self.run(project, self.timeout, self.inner.quotas(project)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Swarming whose server `hang.example.com` never answers.
    #[derive(Debug)]
    struct Hanging(Arc<crate::testing::FakeBots>);

    #[async_trait]
    impl Bots for Hanging {
        async fn get(&self, server: &str, id: &str) -> Result<Option<Bot>, BotError> {
            if server.contains("hang") {
                std::future::pending::<()>().await;
            }
            self.0.get(server, id).await
        }
        async fn list(&self, s: &str, c: Option<String>) -> Result<(Vec<Bot>, Option<String>), BotError> {
            self.0.list(s, c).await
        }
        async fn events(&self, s: &str, id: &str, t: DateTime<Utc>) -> Result<Vec<BotEvent>, BotError> {
            self.0.events(s, id, t).await
        }
        async fn terminate(&self, s: &str, id: &str) -> Result<(), BotError> {
            self.0.terminate(s, id).await
        }
        async fn delete(&self, s: &str, id: &str) -> Result<bool, BotError> {
            self.0.delete(s, id).await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_server_times_out_trips_and_fails_fast_while_others_answer() {
        let iso = Isolation::default();
        let bots = Arc::new(GuardedBots::new(Arc::new(Hanging(Arc::default())), &iso));
        let hang = "https://hang.example.com";
        for _ in 0..iso.trip_after {
            let e = bots.get(hang, "b").await.unwrap_err();
            assert!(e.kind == BotErrorKind::Unavailable && e.message.contains("no answer within"), "{e}");
        }
        let e = bots.get(hang, "b").await.unwrap_err();
        assert!(e.kind == BotErrorKind::Unavailable && e.message.contains("circuit open"), "{e}");
        assert_eq!(
            bots.get("https://swarm.example.com", "b").await.unwrap(),
            None,
            "the good server answers"
        );
    }
}
