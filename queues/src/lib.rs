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

pub mod backend;
pub mod engine;
pub mod metrics;
pub mod outcome;
pub mod policy;
pub mod queue;
pub mod task;
#[cfg(feature = "testing")]
pub mod testing;

pub use backend::{Lease, QueueBackend};
pub use engine::memory::MemoryEngine;
pub use engine::redis::RedisEngine;
pub use engine::{
    Counts, DeadSelection, Engine, PushOutcome, QueueError, QueueSpec, TaskStatus, When, WorkerId,
    new_task_id,
};
pub use metrics::QueueMetrics;
pub use policy::Policy;
pub use queue::{DeadHook, DeadTask, Queue};
pub use task::Task;
