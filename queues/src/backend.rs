//! `QueueBackend`: the apalis 1.0 backend over a queue engine, the same for Redis and memory.
//!
//! * **Fetching**: takes up to `batch` tasks per round trip; when the queue is empty it blocks on
//!   the engine's waiter (a blocking pop on Redis), so an idle worker starts a pushed task at once.
//! * **Leases**: every task this worker holds (buffered or running) is renewed every third of the
//!   lease by one background call; a task held longer than the policy's `timeout` is no longer
//!   renewed, so a stuck handler gives its task back.
//! * **Acks**: the [`AckLayer`] sits outside the handler and every user layer, turns the final
//!   result into a resolution ([`crate::outcome`]) and hands it to a flusher that writes acks in
//!   batches, retrying through Redis outages.
//! * **Faults**: no engine error ends the worker; it logs, backs off (50 ms doubling to 5 s) and
//!   carries on once the engine answers again.
//! * **Shutdown**: apalis stops fetching and lets in-flight tasks finish; then `poll_close`
//!   releases the tasks taken but not started, back to the head of the queue.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use apalis_core::backend::finalize::Ephemeral;
use apalis_core::backend::{Backend, BackendConfig};
use apalis_core::error::BoxDynError;
use apalis_core::task::Task;
use apalis_core::task::builder::TaskBuilder;
use apalis_core::task::task_id::TaskId;
use apalis_core::worker::context::WorkerContext;
use futures::future::{BoxFuture, join_all};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;
use tracing::{debug, warn};

use crate::engine::{Ack, Leased, QueueError, QueueSpec, Resolution, Taken, Waiter, WorkerId};
use crate::outcome;
use crate::queue::Queue;

const FIRST_ERROR_DELAY: Duration = Duration::from_millis(50);
const MAX_ERROR_DELAY: Duration = Duration::from_secs(5);
/// Longest an idle worker blocks before taking again (delayed tasks pushed by other processes
/// send no wake-up, so this bounds how late they can start).
const MAX_IDLE: Duration = Duration::from_secs(1);
/// Acks written per engine call.
const ACK_BATCH: usize = 500;

/// The lease of a task in flight; attached to the apalis task as data.
#[derive(Debug, Clone)]
pub struct Lease {
    /// Task id.
    pub id: String,
    /// Lease token.
    pub token: String,
    /// Run number, 1 for the first.
    pub attempt: u32,
    /// The key the task was pushed under.
    pub key: String,
}

/// Tasks this worker holds: id → (token, held since).
type Held = Arc<Mutex<HashMap<String, (String, Instant)>>>;

fn held_lock(
    h: &Mutex<HashMap<String, (String, Instant)>>,
) -> std::sync::MutexGuard<'_, HashMap<String, (String, Instant)>> {
    h.lock().unwrap_or_else(|e| e.into_inner())
}

enum Fetch {
    Idle,
    Taking(BoxFuture<'static, Result<Taken, QueueError>>),
    Waiting(BoxFuture<'static, (Box<dyn Waiter>, Result<(), QueueError>)>),
    Sleeping(Pin<Box<tokio::time::Sleep>>),
}

/// apalis backend for one worker over one [`Queue`].
pub struct QueueBackend<Args> {
    queue: Queue,
    group: String,
    worker: Option<WorkerId>,
    buffer: VecDeque<Leased>,
    fetch: Fetch,
    waiter: Option<Box<dyn Waiter>>,
    held: Held,
    acker: Option<Acker>,
    closing: Option<BoxFuture<'static, ()>>,
    error_delay: Duration,
    _args: PhantomData<fn() -> Args>,
}

impl<Args> std::fmt::Debug for QueueBackend<Args> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueBackend")
            .field("queue", &self.queue.spec().name)
            .field("worker", &self.worker)
            .field("buffered", &self.buffer.len())
            .finish()
    }
}

impl<Args> QueueBackend<Args> {
    pub(crate) fn new(queue: Queue, group: &str) -> Self {
        Self {
            queue,
            group: group.to_owned(),
            worker: None,
            buffer: VecDeque::new(),
            fetch: Fetch::Idle,
            waiter: None,
            held: Arc::default(),
            acker: None,
            closing: None,
            error_delay: FIRST_ERROR_DELAY,
            _args: PhantomData,
        }
    }

    fn worker_id(&mut self, ctx: &WorkerContext) -> WorkerId {
        self.worker
            .get_or_insert_with(|| WorkerId { group: self.group.clone(), id: ctx.name().to_owned() })
            .clone()
    }

    fn acker(&mut self) -> Acker {
        self.acker.get_or_insert_with(|| Acker::spawn(self.queue.clone())).clone()
    }

    fn accept(&mut self, tasks: Vec<Leased>) {
        let now = Instant::now();
        let mut held = held_lock(&self.held);
        for l in &tasks {
            held.insert(l.id.clone(), (l.token.clone(), now));
        }
        drop(held);
        self.buffer.extend(tasks);
    }

    fn on_error(&mut self, what: &str, e: &QueueError) {
        warn!(queue = %self.queue.spec().name, error = %e, retry_in = ?self.error_delay, "{what} failed");
        self.fetch = Fetch::Sleeping(Box::pin(tokio::time::sleep(self.error_delay)));
        self.error_delay = (self.error_delay * 2).min(MAX_ERROR_DELAY);
    }
}

impl<Args: DeserializeOwned + Send + 'static> Backend for QueueBackend<Args> {
    type Task = Task<Args>;
    type Error = QueueError;

    fn poll_ready(&mut self, _: &mut Context<'_>, _: &WorkerContext) -> Poll<Result<(), QueueError>> {
        Poll::Ready(Ok(()))
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        ctx: &WorkerContext,
    ) -> Poll<Option<Result<Task<Args>, QueueError>>> {
        loop {
            if let Some(l) = self.buffer.pop_front() {
                match serde_json::from_str::<Args>(&l.payload) {
                    Ok(args) => {
                        let task = TaskBuilder::new(args)
                            .task_id(TaskId::from_string(l.id.clone()))
                            .attempt(l.attempt.saturating_sub(1) as usize)
                            .data(Lease { id: l.id, token: l.token, attempt: l.attempt, key: l.key })
                            .build();
                        return Poll::Ready(Some(Ok(task)));
                    }
                    Err(e) => {
                        // A payload this build cannot read will not get better by retrying.
                        warn!(queue = %self.queue.spec().name, task = %l.id, error = %e, "undecodable payload");
                        held_lock(&self.held).remove(&l.id);
                        let acker = self.acker();
                        let error = format!("undecodable payload: {e}");
                        tokio::spawn(async move {
                            acker
                                .ack(Ack { id: l.id, token: l.token, resolution: Resolution::Fail { error } })
                                .await
                        });
                        continue;
                    }
                }
            }
            match std::mem::replace(&mut self.fetch, Fetch::Idle) {
                Fetch::Idle => {
                    let engine = self.queue.engine().clone();
                    let spec = self.queue.spec().clone();
                    let worker = self.worker_id(ctx);
                    let max = spec.policy.batch;
                    self.fetch =
                        Fetch::Taking(Box::pin(async move { engine.take(&spec, &worker, max).await }));
                }
                Fetch::Taking(mut f) => match f.as_mut().poll(cx) {
                    Poll::Pending => {
                        self.fetch = Fetch::Taking(f);
                        return Poll::Pending;
                    }
                    Poll::Ready(Err(e)) => self.on_error("take", &e),
                    Poll::Ready(Ok(taken)) => {
                        self.error_delay = FIRST_ERROR_DELAY;
                        if taken.tasks.is_empty() {
                            let wait = taken.next_due.unwrap_or(MAX_IDLE).min(MAX_IDLE);
                            if wait >= Duration::from_millis(5) {
                                let mut waiter = match self.waiter.take() {
                                    Some(w) => w,
                                    None => self.queue.engine().waiter(self.queue.spec()),
                                };
                                self.fetch = Fetch::Waiting(Box::pin(async move {
                                    let r = waiter.wait(wait).await;
                                    (waiter, r)
                                }));
                            }
                        } else {
                            self.accept(taken.tasks);
                        }
                    }
                },
                Fetch::Waiting(mut f) => match f.as_mut().poll(cx) {
                    Poll::Pending => {
                        self.fetch = Fetch::Waiting(f);
                        return Poll::Pending;
                    }
                    Poll::Ready((waiter, r)) => {
                        self.waiter = Some(waiter);
                        if let Err(e) = r {
                            self.on_error("wait", &e);
                        }
                    }
                },
                Fetch::Sleeping(mut s) => {
                    if s.as_mut().poll(cx).is_pending() {
                        self.fetch = Fetch::Sleeping(s);
                        return Poll::Pending;
                    }
                }
            }
        }
    }

    fn poll_close(&mut self, cx: &mut Context<'_>, _: &WorkerContext) -> Poll<Result<(), QueueError>> {
        if self.closing.is_none() {
            // A take under way may already hold tasks in the engine: let it land, then release.
            if let Fetch::Taking(f) = &mut self.fetch {
                match f.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(taken)) => self.accept(taken.tasks),
                    Poll::Ready(Err(_)) => {}
                }
            }
            self.fetch = Fetch::Idle;
            let unstarted: Vec<Leased> = self.buffer.drain(..).collect();
            let acker = (!unstarted.is_empty()).then(|| self.acker());
            let held = self.held.clone();
            debug!(queue = %self.queue.spec().name, released = unstarted.len(), "closing");
            self.closing = Some(Box::pin(async move {
                let Some(acker) = acker else { return };
                join_all(unstarted.into_iter().map(|l| {
                    held_lock(&held).remove(&l.id);
                    acker.ack(Ack { id: l.id, token: l.token, resolution: Resolution::Release })
                }))
                .await;
            }));
        }
        let closing = self.closing.as_mut().expect("set above");
        closing.as_mut().poll(cx).map(Ok)
    }
}

impl<Args> BackendConfig for QueueBackend<Args> {
    type Args = Args;
    type Id = String;
    type Kind = Ephemeral;
    type Config = QueueSpec;
    type Layer = AckLayer;

    fn config(&self) -> &QueueSpec {
        self.queue.spec()
    }

    fn middleware(&mut self, worker: &mut WorkerContext) -> AckLayer {
        self.worker_id(worker);
        spawn_renewer(self.queue.clone(), Arc::downgrade(&self.held));
        AckLayer { acker: self.acker(), held: self.held.clone(), queue: self.queue.clone() }
    }
}

/// Renews the leases of every task in `held` every third of the lease, until the backend is gone.
fn spawn_renewer(queue: Queue, held: Weak<Mutex<HashMap<String, (String, Instant)>>>) {
    let policy = queue.spec().policy.clone();
    tokio::spawn(async move {
        let every = policy.lease / 3;
        let limit = policy.timeout + policy.lease;
        loop {
            tokio::time::sleep(every).await;
            let Some(held) = held.upgrade() else { return };
            let leases: Vec<(String, String)> = held_lock(&held)
                .iter()
                .filter(|(_, (_, since))| since.elapsed() < limit)
                .map(|(id, (token, _))| (id.clone(), token.clone()))
                .collect();
            drop(held);
            if leases.is_empty() {
                continue;
            }
            match queue.engine().renew(queue.spec(), &leases).await {
                Ok(lost) if !lost.is_empty() => {
                    warn!(queue = %queue.spec().name, ?lost, "leases lost: these tasks may run twice")
                }
                Ok(_) => {}
                Err(e) => warn!(queue = %queue.spec().name, error = %e, "lease renewal failed"),
            }
        }
    });
}

type AckMsg = (Ack, oneshot::Sender<()>);

/// Sends acks to a flusher task that writes them in batches.
#[derive(Debug, Clone)]
struct Acker {
    tx: mpsc::UnboundedSender<AckMsg>,
}

impl Acker {
    fn spawn(queue: Queue) -> Self {
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
                let acks: Vec<Ack> = batch.iter().map(|(a, _)| a.clone()).collect();
                let mut delay = FIRST_ERROR_DELAY;
                loop {
                    match queue.engine().finish(queue.spec(), &acks).await {
                        Ok(0) => break,
                        Ok(stale) => {
                            warn!(queue = %queue.spec().name, stale, "acks for leases already lost were ignored");
                            break;
                        }
                        Err(e) => {
                            warn!(queue = %queue.spec().name, error = %e, retry_in = ?delay, "ack failed");
                            tokio::time::sleep(delay).await;
                            delay = (delay * 2).min(MAX_ERROR_DELAY);
                        }
                    }
                }
                for (_, done) in batch {
                    let _ = done.send(());
                }
            }
        });
        Self { tx }
    }

    /// Hands `ack` to the flusher and waits until it is written.
    fn ack(&self, ack: Ack) -> impl Future<Output = ()> + Send + 'static {
        let (done, written) = oneshot::channel();
        let sent = self.tx.send((ack, done)).is_ok();
        async move {
            if sent {
                let _ = written.await;
            }
        }
    }
}

/// Middleware added by [`QueueBackend`]: acknowledges each task with the resolution of its
/// final result.
#[derive(Debug, Clone)]
pub struct AckLayer {
    acker: Acker,
    held: Held,
    queue: Queue,
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
        let lease = task.data().get::<Lease>().cloned();
        let fut = self.inner.call(task);
        let layer = self.layer.clone();
        Box::pin(async move {
            let result = fut.await.map_err(Into::into);
            if let Some(lease) = lease {
                let resolution = outcome::resolution(&result, lease.attempt, &layer.queue.spec().policy);
                layer.acker.ack(Ack { id: lease.id.clone(), token: lease.token, resolution }).await;
                held_lock(&layer.held).remove(&lease.id);
            }
            result
        })
    }
}
