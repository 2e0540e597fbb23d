//! The ack side of [`super::QueueBackend`]: the [`AckLayer`] that runs each task inside its tracing
//! span and turns the result into a resolution, the flusher that writes acks in batches, and the
//! report of runs that sent their task to the dead set (a WARN line and the queue's dead hook).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll};

use apalis_core::error::BoxDynError;
use apalis_core::task::Task;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tower_layer::Layer;
use tower_service::Service;
use tracing::{Instrument, debug, warn};

use super::lease::{FIRST_ERROR_DELAY, Held, Lease, MAX_ERROR_DELAY, held_lock};
use crate::dead::DeadTask;
use crate::engine::{Ack, Resolution};
use crate::outcome;
use crate::queue::Queue;

/// Acks written per engine call.
const ACK_BATCH: usize = 500;

/// An ack (or none: a mark that every ack sent before it is written), and who waits for it:
/// told `true` when its batch was written with no stale ack, so this one surely took effect.
type AckMsg = (Option<Ack>, oneshot::Sender<bool>);

/// Sends acks to a flusher task that writes them in batches.
#[derive(Debug, Clone)]
pub(super) struct Acker {
    tx: mpsc::UnboundedSender<AckMsg>,
}

impl Acker {
    pub(super) fn spawn(queue: Queue) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<AckMsg>();
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < ACK_BATCH {
                    match rx.try_recv() {
                        Ok(m) => batch.push(m),
                        Err(_) => break,
                    }
                }
                let acks: Vec<Ack> = batch.iter().filter_map(|(a, _)| a.clone()).collect();
                // A batch of marks only has nothing to write.
                let clean = acks.is_empty() || write(&queue, &acks).await;
                for (_, done) in batch {
                    let _ = done.send(clean);
                }
            }
        });
        Self { tx }
    }

    /// Hands `ack` to the flusher and waits until it is written. True when it surely took effect;
    /// false when its batch held acks for leases already lost (maybe this one) or the flusher is
    /// gone.
    pub(super) fn ack(&self, ack: Ack) -> impl Future<Output = bool> + Send + 'static {
        let (done, written) = oneshot::channel();
        let sent = self.tx.send((Some(ack), done)).is_ok();
        async move { sent && written.await.unwrap_or(false) }
    }

    /// Resolves once every ack handed to the flusher before this call is written (or the
    /// flusher is gone: then false).
    pub(super) fn flushed(&self) -> impl Future<Output = bool> + Send + 'static {
        let (done, reached) = oneshot::channel();
        let sent = self.tx.send((None, done)).is_ok();
        // The mark's batch may hold a stale ack (its own waiter is told so): reached is enough.
        async move { sent && reached.await.is_ok() }
    }
}

/// Writes `acks`, retrying through engine errors; true when none was stale.
async fn write(queue: &Queue, acks: &[Ack]) -> bool {
    let mut delay = FIRST_ERROR_DELAY;
    loop {
        match queue.engine().finish(queue.spec(), acks).await {
            Ok(0) => return true,
            Ok(stale) => {
                warn!(queue = %queue.spec().name, stale, "acks for leases already lost were ignored");
                return false;
            }
            Err(e) => {
                warn!(queue = %queue.spec().name, error = %e, retry_in = ?delay, "ack failed");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_ERROR_DELAY);
            }
        }
    }
}

/// Reports a run that sent its task to the dead set: one WARN line `task dead`, then the queue's
/// dead hook. When the ack may have been ignored (`written` false: its lease was lost and the
/// task delivered again), the task's status is checked first and nothing is reported unless it
/// is dead from this run.
pub(super) async fn report_dead(queue: &Queue, dead: DeadTask, written: bool) {
    if !written && !dead_from_this_run(queue, &dead).await {
        debug!(queue = %dead.queue, task = %dead.id, "the run's ack was ignored: not reported as dead");
        return;
    }
    warn!(
        queue = %dead.queue,
        task = %dead.id,
        key = %dead.key,
        attempts = dead.attempts,
        reason = %dead.reason,
        error = %dead.error,
        "task dead"
    );
    let Some(hook) = queue.dead_hook() else { return };
    let called = std::panic::catch_unwind(AssertUnwindSafe(|| hook(dead.clone())));
    let ran = match called {
        Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await.is_ok(),
        Err(_) => false,
    };
    if !ran {
        warn!(queue = %dead.queue, task = %dead.id, "the dead hook panicked");
    }
}

async fn dead_from_this_run(queue: &Queue, dead: &DeadTask) -> bool {
    match queue.status(&dead.id).await {
        Ok(Some(st)) => st.state == "failed" && st.reason == dead.reason && st.attempts == dead.attempts,
        Ok(None) => false,
        Err(e) => {
            warn!(queue = %dead.queue, task = %dead.id, error = %e, "could not read the status of a task that went dead");
            false
        }
    }
}

/// Middleware added by [`super::QueueBackend`]: runs each task inside a `task` span, acknowledges
/// it with the resolution of its final result, and reports a run that sent it to the dead set.
#[derive(Debug, Clone)]
pub struct AckLayer {
    acker: Acker,
    held: Held,
    queue: Queue,
}

impl AckLayer {
    pub(super) fn new(acker: Acker, held: Held, queue: Queue) -> Self {
        Self { acker, held, queue }
    }
}

impl<S> Layer<S> for AckLayer {
    type Service = AckService<S>;

    fn layer(&self, inner: S) -> AckService<S> {
        AckService { inner, layer: self.clone() }
    }
}

/// See [`AckLayer`].
#[derive(Debug, Clone)]
pub struct AckService<S> {
    inner: S,
    layer: AckLayer,
}

impl<S, Args> Service<Task<Args>> for AckService<S>
where
    S: Service<Task<Args>>,
    S::Error: Into<BoxDynError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxDynError;
    type Future = BoxFuture<'static, Result<S::Response, BoxDynError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxDynError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, task: Task<Args>) -> Self::Future {
        let Some(lease) = task.data().get::<Lease>().cloned() else {
            let fut = self.inner.call(task);
            return Box::pin(async move { fut.await.map_err(Into::into) });
        };
        let layer = self.layer.clone();
        let queue = layer.queue.spec().name.clone();
        // At ERROR level so the span is on under any filter that lets one of the handler's lines
        // through: every line the handler (and the layers inside this one) logs carries it.
        let span = tracing::error_span!(
            "task",
            queue = %queue,
            task = %lease.id,
            key = %lease.key,
            attempt = lease.attempt
        );
        if let Some(m) = layer.queue.metrics() {
            // Due to taken (the engine's clock), then taken to this handler's start.
            m.waited(&queue, lease.waited_ms as f64 / 1000.0 + lease.taken.elapsed().as_secs_f64());
        }
        if let Some(h) = held_lock(&layer.held).get_mut(&lease.id) {
            h.started = true;
        }
        let started = tokio::time::Instant::now();
        let fut = span.in_scope(|| self.inner.call(task)).instrument(span);
        Box::pin(async move {
            let result = fut.await.map_err(Into::into);
            let policy = &layer.queue.spec().policy;
            let resolution = outcome::resolution(&result, lease.attempt, policy);
            let dead = outcome::dead_reason(&resolution, lease.attempt, policy);
            if let Some(m) = layer.queue.metrics() {
                let ended = match (&resolution, dead) {
                    (_, Some(_)) => "dead",
                    (Resolution::Done | Resolution::Again { .. }, _) => "done",
                    // A run's result never releases nor hands back its task (a stop does,
                    // outside runs).
                    (Resolution::Release | Resolution::HandBack, _) => "released",
                    (Resolution::Retry { .. } | Resolution::Fail { .. }, None) => "retry",
                };
                m.ran(&queue, ended, started.elapsed().as_secs_f64());
            }
            let error = match &resolution {
                Resolution::Retry { error, .. } | Resolution::Fail { error } => error.clone(),
                Resolution::Done | Resolution::Release | Resolution::HandBack | Resolution::Again { .. } => {
                    String::new()
                }
            };
            if let (None, Resolution::Retry { after, .. }) = (dead, &resolution) {
                // The handler logs its own error; this is the queue's side of it.
                debug!(queue = %queue, task = %lease.id, key = %lease.key, attempt = lease.attempt,
                    retry_in = ?after, error = %error, "task failed, will retry");
            }
            let ack = Ack { id: lease.id.clone(), token: lease.token.clone(), resolution };
            if let Some(h) = held_lock(&layer.held).get_mut(&lease.id) {
                h.acking = true;
            }
            let written = layer.acker.ack(ack).await;
            held_lock(&layer.held).remove(&lease.id);
            if let Some(reason) = dead {
                let dead = DeadTask {
                    queue,
                    id: lease.id,
                    key: lease.key,
                    attempts: lease.attempt,
                    reason: reason.to_owned(),
                    error,
                };
                report_dead(&layer.queue, dead, written).await;
            }
            result
        })
    }
}
