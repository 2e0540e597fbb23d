//! `Queue`: one named queue on an engine, the handle producers, workers and operators use.

use std::sync::Arc;

use chrono::Utc;
use serde::Serialize;

use crate::backend::QueueBackend;
use crate::engine::{
    Counts, DeadSelection, Engine, PushItem, PushOutcome, QueueError, QueueSpec, TaskStatus, When,
};

/// A named queue on an engine. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Queue {
    engine: Arc<dyn Engine>,
    spec: Arc<QueueSpec>,
}

impl Queue {
    /// The queue `spec` on `engine`.
    pub fn new(engine: Arc<dyn Engine>, spec: QueueSpec) -> Self {
        Self { engine, spec: Arc::new(spec) }
    }

    /// Name and policy.
    pub fn spec(&self) -> &QueueSpec {
        &self.spec
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// Pushes one task under `key`; see [`PushOutcome`] for what a push can do.
    pub async fn push<T: Serialize>(
        &self,
        key: &str,
        payload: &T,
        when: When,
    ) -> Result<PushOutcome, QueueError> {
        let mut out = self.push_many([(key.to_owned(), payload)], when).await?;
        out.pop().ok_or_else(|| QueueError::Corrupt("push returned nothing".into()))
    }

    /// Pushes many tasks in few round trips (1 000 per call); one outcome per item, in order.
    pub async fn push_many<'a, T: Serialize + 'a>(
        &self,
        items: impl IntoIterator<Item = (String, &'a T)>,
        when: When,
    ) -> Result<Vec<PushOutcome>, QueueError> {
        let delay_ms = when.delay_ms(Utc::now());
        let items = items
            .into_iter()
            .map(|(key, payload)| {
                if key.is_empty() || key.len() > 512 {
                    return Err(QueueError::Invalid(format!("task key {key:?}: must be 1-512 bytes")));
                }
                let payload = serde_json::to_string(payload)
                    .map_err(|e| QueueError::Invalid(format!("payload of {key}: {e}")))?;
                Ok(PushItem { key, payload, delay_ms })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.engine.push(&self.spec, &items).await
    }

    /// Counts and counters, each read in O(1).
    pub async fn counts(&self) -> Result<Counts, QueueError> {
        self.engine.counts(&self.spec).await
    }

    /// One task's status by id.
    pub async fn status(&self, id: &str) -> Result<Option<TaskStatus>, QueueError> {
        self.engine.status(&self.spec, id).await
    }

    /// The status of the key's live (pending or running) task, if any.
    pub async fn live(&self, key: &str) -> Result<Option<TaskStatus>, QueueError> {
        match self.engine.live_id(&self.spec, key).await? {
            Some(id) => self.status(&id).await,
            None => Ok(None),
        }
    }

    /// Dead tasks, newest first.
    pub async fn dead(&self, limit: usize) -> Result<Vec<TaskStatus>, QueueError> {
        self.engine.dead(&self.spec, limit).await
    }

    /// Puts dead tasks back as pending with fresh attempts; returns how many were handled.
    pub async fn retry_dead(&self, which: DeadSelection) -> Result<u64, QueueError> {
        self.engine.retry_dead(&self.spec, which).await
    }

    /// Drops every dead task; returns how many.
    pub async fn purge_dead(&self) -> Result<u64, QueueError> {
        self.engine.purge_dead(&self.spec).await
    }

    /// An apalis backend that feeds this queue's tasks, decoded as `Args`, to one worker of
    /// worker group `group` (e.g. the host name).
    pub fn backend<Args>(&self, group: &str) -> QueueBackend<Args> {
        QueueBackend::new(self.clone(), group)
    }
}
