//! How work travels: keyed task queues on Redis (production) or in memory (the embedded
//! default), with the same semantics, driven by apalis 1.0 workers.
//!
//! * [`engine`]: the contract ([`engine::Engine`]) and its two implementations.
//! * [`Queue`]: a named queue with its [`Policy`]; push, counts, status, operator operations on
//!   pending and dead tasks, an optional [`DeadHook`], and [`Queue::backend`], the apalis backend
//!   workers run on.
//! * [`metrics`]: what this process's workers measure per queue.
//! * [`outcome`]: how a handler's result becomes done, retry or dead.
//!
//! Task payloads outlive deploys in Redis: a change to a payload type is a wire change.
//!
//! # Layout
//!
//! Floors, bottom to top, one module a line. A module imports only from the floors below it and
//! from the lines above it on its own floor, never up (`scripts/floors queues/src` finds no cycle):
//!
//! 1. Records and pure rules
//!    * `policy`: a queue's delivery policy (attempts, backoff, lease, timeout, batch).
//!    * `task`: the [`Task`] trait payloads implement (their key).
//!    * `engine::id`: task ids.
//!    * `engine::model`: what crosses the engine contract: spec, push, lease, resolution, ack,
//!      counts, status, [`QueueError`].
//!    * `engine::record`: the stored task record both engines share, and corrupt ones.
//!    * `outcome`: a handler's result becomes a resolution (done, retry, dead).
//!    * `dead`: a task that went dead ([`DeadTask`]) and the hook that hears of it ([`DeadHook`]).
//! 2. Ports
//!    * `clock`: the one place the time is read ([`Clock`], [`SystemClock`]).
//!    * `link::target`: what a `--redis` URL asks for (parsed strictly).
//!    * `link`: how Redis is reached: one server, Sentinel or Cluster, TLS, rotating passwords
//!      (`auth.rs`), what a link is opened with (`setup.rs`), a followed primary (`sentinel.rs`).
//!    * `engine`: the contract ([`Engine`], `Waiter`).
//!    * `engine::memory`: the in-memory engine (`script.rs` its helpers, `ops.rs` one op a script).
//!    * `engine::redis`: the Redis engine (Lua scripts in `lua/`).
//! 3. The queue
//!    * `metrics`: what workers measure per queue.
//!    * `queue`: the [`Queue`] facade producers and operators use.
//! 4. Workers
//!    * `backend::lease`: what fetching and acking share (leases, held tasks, error backoff).
//!    * `backend::ack`: the ack layer around each run, batched acks, the dead report.
//!    * `backend::stop`: the hand-back of what workers hold when their stop runs out of time.
//!    * `backend`: the apalis [`QueueBackend`] (fetch, renew, release), and [`Queue::backend`].
//!
//! `testing` (feature `testing`) helps tests only.

pub mod backend;
pub mod clock;
pub mod dead;
pub mod engine;
pub mod link;
pub mod metrics;
pub mod outcome;
pub mod policy;
pub mod queue;
pub mod task;
#[cfg(feature = "testing")]
pub mod testing;

pub use backend::{Lease, QueueBackend};
pub use clock::{Clock, SystemClock};
pub use dead::{DeadHook, DeadTask};
pub use engine::memory::MemoryEngine;
pub use engine::redis::RedisEngine;
pub use engine::{
    Counts, DeadSelection, Engine, PushOutcome, QueueError, QueueSpec, TaskStatus, When, WorkerId,
    new_task_id,
};
pub use metrics::QueueMetrics;
pub use policy::Policy;
pub use queue::Queue;
pub use task::Task;
