//! `Queue`: one named queue on an engine, the handle producers, workers and operators use.

use std::sync::{Arc, OnceLock};

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::clock::{self, Clock};
use crate::dead::DeadHook;
use crate::engine::{
    Counts, DeadSelection, Engine, PushItem, PushOutcome, QueueError, QueueSpec, TaskStatus, When,
};
use crate::metrics::QueueMetrics;

/// A named queue on an engine. Cheap to clone.
#[derive(Clone)]
pub struct Queue {
    engine: Arc<dyn Engine>,
    spec: Arc<QueueSpec>,
    dead_hook: Option<DeadHook>,
    metrics: Option<QueueMetrics>,
    clock: Arc<dyn Clock>,
    pusher: Arc<OnceLock<Pusher>>,
}

/// A push and who waits for its outcome.
type PushMsg = (PushItem, oneshot::Sender<Result<PushOutcome, QueueError>>);

/// Gathers the single pushes made at once (by many handlers of this process) into one engine
/// call: while a call is on its way, the pushes that arrive wait for the next one, together.
#[derive(Debug)]
struct Pusher {
    tx: mpsc::UnboundedSender<PushMsg>,
}

impl Pusher {
    fn spawn(engine: Arc<dyn Engine>, spec: Arc<QueueSpec>) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<PushMsg>();
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < PUSH_BATCH {
                    match rx.try_recv() {
                        Ok(m) => batch.push(m),
                        Err(_) => break,
                    }
                }
                let items: Vec<PushItem> = batch.iter().map(|(item, _)| item.clone()).collect();
                match engine.push(&spec, &items).await {
                    Ok(outcomes) => {
                        for ((_, done), outcome) in batch.into_iter().zip(outcomes) {
                            let _ = done.send(Ok(outcome));
                        }
                    }
                    Err(e) => {
                        for (_, done) in batch {
                            let _ = done.send(Err(e.clone()));
                        }
                    }
                }
            }
        });
        Self { tx }
    }
}

/// Single pushes gathered into one engine call, at most.
const PUSH_BATCH: usize = 500;

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("engine", &self.engine)
            .field("spec", &self.spec)
            .field("dead_hook", &self.dead_hook.is_some())
            .finish()
    }
}

impl Queue {
    /// The queue `spec` on `engine`.
    pub fn new(engine: Arc<dyn Engine>, spec: QueueSpec) -> Self {
        Self {
            engine,
            spec: Arc::new(spec),
            dead_hook: None,
            metrics: None,
            clock: clock::system(),
            pusher: Arc::default(),
        }
    }

    /// This queue reading the time (for pushes due at a given time) from `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// This queue with `hook` called for each run that sends its task to the dead set (by the
    /// workers of backends made from it afterwards).
    pub fn with_dead_hook(mut self, hook: DeadHook) -> Self {
        self.dead_hook = Some(hook);
        self
    }

    /// This queue with its workers' runs measured in `metrics` (by the workers of backends made
    /// from it afterwards); its series there read zero until then.
    pub fn with_metrics(mut self, metrics: QueueMetrics) -> Self {
        metrics.declare(&self.spec().name);
        self.metrics = Some(metrics);
        self
    }

    /// The measurements set with [`Queue::with_metrics`].
    pub fn metrics(&self) -> Option<&QueueMetrics> {
        self.metrics.as_ref()
    }

    /// The hook set with [`Queue::with_dead_hook`].
    pub fn dead_hook(&self) -> Option<&DeadHook> {
        self.dead_hook.as_ref()
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
        let item = self.item(key.to_owned(), payload, when)?;
        let pusher = self.pusher.get_or_init(|| Pusher::spawn(self.engine.clone(), self.spec.clone()));
        let (done, outcome) = oneshot::channel();
        if let Err(mpsc::error::SendError((item, _))) = pusher.tx.send((item, done)) {
            // The gatherer is gone (its runtime ended): push on our own.
            return self.engine.push(&self.spec, &[item]).await?.pop().ok_or_else(nothing);
        }
        outcome.await.map_err(|_| nothing())?
    }

    /// A push item: the key checked, the payload encoded.
    fn item<T: Serialize>(&self, key: String, payload: &T, when: When) -> Result<PushItem, QueueError> {
        if key.is_empty() || key.len() > 512 {
            return Err(QueueError::Invalid(format!("task key {key:?}: must be 1-512 bytes")));
        }
        let payload = serde_json::to_string(payload)
            .map_err(|e| QueueError::Invalid(format!("payload of {key}: {e}")))?;
        Ok(PushItem { key, payload, delay_ms: when.delay_ms(self.clock.now()), hurry: when == When::Hurry })
    }

    /// Pushes many tasks in few round trips (1 000 per call); one outcome per item, in order.
    pub async fn push_many<'a, T: Serialize + 'a>(
        &self,
        items: impl IntoIterator<Item = (String, &'a T)>,
        when: When,
    ) -> Result<Vec<PushOutcome>, QueueError> {
        let when = match when {
            When::At(_) => When::After(std::time::Duration::from_millis(when.delay_ms(self.clock.now()))),
            w => w,
        };
        let items = items
            .into_iter()
            .map(|(key, payload)| self.item(key, payload, when))
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
    pub async fn status_by_key(&self, key: &str) -> Result<Option<TaskStatus>, QueueError> {
        let Some(id) = self.engine.live_id(&self.spec, key).await? else { return Ok(None) };
        // The key map may still name a task that was buried as corrupt: only a live one counts.
        Ok(self.status(&id).await?.filter(|st| st.state == "pending" || st.state == "running"))
    }

    /// Due tasks in the order they will be taken: `limit` of them from position `offset`.
    pub async fn pending(&self, limit: usize, offset: usize) -> Result<Vec<TaskStatus>, QueueError> {
        self.engine.pending(&self.spec, limit, offset).await
    }

    /// Delayed tasks (pushed with a delay, or waiting for a retry), soonest first, each with its
    /// `run_at`: `limit` of them from position `offset`.
    pub async fn delayed(&self, limit: usize, offset: usize) -> Result<Vec<TaskStatus>, QueueError> {
        self.engine.delayed(&self.spec, limit, offset).await
    }

    /// Drops every pending task, due and delayed, so the next push of their keys enqueues fresh
    /// tasks; returns how many. Works in chunks of 500, so a backlog of any size goes without
    /// blocking Redis for long.
    ///
    /// Running tasks are untouched, and so are their follow-ups (a push that arrived during a run
    /// still becomes pending when the run ends). Tasks pushed while the purge runs may survive it.
    pub async fn purge_pending(&self) -> Result<u64, QueueError> {
        self.engine.purge_pending(&self.spec).await
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
}

/// An engine call that answered nothing for a push.
fn nothing() -> QueueError {
    QueueError::Corrupt("push returned nothing".into())
}
