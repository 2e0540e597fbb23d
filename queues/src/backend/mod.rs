//! `QueueBackend`: the apalis 1.0 backend over a queue engine, the same for Redis and memory.
//!
//! * **Fetching**: takes up to `batch` tasks per round trip; when the queue is empty it blocks on
//!   the engine's waiter (a blocking pop on Redis), so an idle worker starts a pushed task at once.
//! * **Leases**: every task this worker holds (buffered or running) is renewed every third of the
//!   lease by one background call; a task held longer than the policy's `timeout` is no longer
//!   renewed, so a stuck handler gives its task back.
//! * **Acks**: the [`AckLayer`] sits outside the handler and every user layer, runs them inside a
//!   `task` span (queue, task id, key, attempt), turns the final result into a resolution
//!   ([`crate::outcome`]) and hands it to a flusher that writes acks in batches, retrying through
//!   Redis outages. A run that sends its task to the dead set is logged (`task dead`, at WARN) and
//!   handed to the queue's [`crate::dead::DeadHook`]; see `ack.rs`.
//! * **Faults**: no engine error ends the worker; it logs, backs off (50 ms doubling to 5 s) and
//!   carries on once the engine answers again.
//! * **Shutdown**: apalis stops fetching and lets in-flight tasks finish; then `poll_close`
//!   releases the tasks taken but not started, back to the head of the queue. A stop has a bound
//!   (the monitor's `shutdown_timeout`): past it the workers are dropped, and what they held is
//!   handed back at once (runs cut short as [`Resolution::HandBack`], the rest released) by the
//!   [`stop::Holdings`] their backends joined ([`QueueBackend::held_in`]); see `stop.rs`.

mod ack;
mod lease;
pub mod stop;

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use apalis_core::backend::finalize::Ephemeral;
use apalis_core::backend::{Backend, BackendConfig};
use apalis_core::task::Task;
use apalis_core::task::builder::TaskBuilder;
use apalis_core::task::task_id::TaskId;
use apalis_core::worker::context::WorkerContext;
use futures::future::{BoxFuture, join_all};
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tracing::{debug, warn};

pub use self::ack::{AckLayer, AckService};
use self::ack::{Acker, report_dead};
pub use self::lease::Lease;
use self::lease::{FIRST_ERROR_DELAY, Held, Hold, MAX_ERROR_DELAY, held_lock};
use self::stop::Holdings;
use crate::dead::DeadTask;
use crate::engine::{Ack, Leased, QueueError, QueueSpec, Resolution, Taken, Waiter, WorkerId};
use crate::outcome;
use crate::queue::Queue;

/// Longest an idle worker blocks before taking again. Due tasks, and a delayed task that is the
/// soonest of its queue, wake a waiting worker (which then waits for the soonest due time), so
/// this only bounds how late a task starts if a wake-up went astray.
const MAX_IDLE: Duration = Duration::from_secs(5);

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
    buffer: VecDeque<(Leased, Instant)>,
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

impl Queue {
    /// An apalis backend that feeds this queue's tasks, decoded as `Args`, to one worker of
    /// worker group `group` (e.g. the host name).
    pub fn backend<Args>(&self, group: &str) -> QueueBackend<Args> {
        QueueBackend::new(self.clone(), group)
    }
}

impl<Args> QueueBackend<Args> {
    fn new(queue: Queue, group: &str) -> Self {
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

    /// This backend with the tasks it holds followed by `holdings`, which hands them back if
    /// the workers' stop runs out of time ([`stop::Holdings::hand_back`]).
    pub fn held_in(mut self, holdings: &Holdings) -> Self {
        let acker = self.acker();
        holdings.add(&self.queue, &self.held, acker);
        self
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
            held.insert(
                l.id.clone(),
                Hold { token: l.token.clone(), since: now, started: false, acking: false },
            );
        }
        drop(held);
        self.buffer.extend(tasks.into_iter().map(|l| (l, now)));
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
            if let Some((l, taken)) = self.buffer.pop_front() {
                match serde_json::from_str::<Args>(&l.payload) {
                    Ok(args) => {
                        let task = TaskBuilder::new(args)
                            .task_id(TaskId::from_string(l.id.clone()))
                            .attempt(l.attempt.saturating_sub(1) as usize)
                            .data(Lease {
                                id: l.id,
                                token: l.token,
                                attempt: l.attempt,
                                key: l.key,
                                waited_ms: l.waited_ms,
                                taken,
                            })
                            .build();
                        return Poll::Ready(Some(Ok(task)));
                    }
                    Err(e) => {
                        // A payload this build cannot read will not get better by retrying.
                        held_lock(&self.held).remove(&l.id);
                        let acker = self.acker();
                        let queue = self.queue.clone();
                        let error = format!("undecodable payload: {e}");
                        if let Some(m) = self.queue.metrics() {
                            m.ended(&self.queue.spec().name, "dead");
                        }
                        tokio::spawn(async move {
                            let fail = Resolution::Fail { error: error.clone() };
                            let written =
                                acker.ack(Ack { id: l.id.clone(), token: l.token, resolution: fail }).await;
                            let dead = DeadTask {
                                queue: queue.spec().name.clone(),
                                id: l.id,
                                key: l.key,
                                attempts: l.attempt,
                                reason: outcome::PERMANENT.into(),
                                error,
                            };
                            report_dead(&queue, dead, written).await;
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
            let unstarted: Vec<Leased> = self.buffer.drain(..).map(|(l, _)| l).collect();
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
        AckLayer::new(self.acker(), self.held.clone(), self.queue.clone())
    }
}

/// Renews the leases of every task in `held` every third of the lease, until the backend is gone.
fn spawn_renewer(queue: Queue, held: Weak<Mutex<HashMap<String, Hold>>>) {
    let policy = queue.spec().policy.clone();
    tokio::spawn(async move {
        let every = policy.lease / 3;
        let limit = policy.timeout + policy.lease;
        loop {
            tokio::time::sleep(every).await;
            let Some(held) = held.upgrade() else { return };
            let leases: Vec<(String, String)> = held_lock(&held)
                .iter()
                .filter(|(_, h)| h.since.elapsed() < limit)
                .map(|(id, h)| (id.clone(), h.token.clone()))
                .collect();
            if leases.is_empty() {
                continue;
            }
            let renewed = queue.engine().renew(queue.spec(), &leases).await;
            // Only a task still running under the same lease was lost: one acked (or acking)
            // since the snapshot raced this renewal.
            let renewed = renewed.map(|lost| {
                let h = held_lock(&held);
                let token = |id: &String| leases.iter().find(|(i, _)| i == id).map(|(_, t)| t);
                lost.into_iter()
                    .filter(|id| h.get(id).is_some_and(|x| !x.acking && Some(&x.token) == token(id)))
                    .collect::<Vec<_>>()
            });
            drop(held);
            match renewed {
                Ok(lost) if !lost.is_empty() => {
                    if let Some(m) = queue.metrics() {
                        m.lost(&queue.spec().name, lost.len());
                    }
                    warn!(queue = %queue.spec().name, ?lost, "leases lost: these tasks may run twice")
                }
                Ok(_) => {}
                Err(e) => warn!(queue = %queue.spec().name, error = %e, "lease renewal failed"),
            }
        }
    });
}
