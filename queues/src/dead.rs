//! A task that went to the dead set at the end of a run ([`DeadTask`]), and the hook the
//! application gives a queue to hear of it ([`DeadHook`]).

use std::sync::Arc;

use futures::future::BoxFuture;

/// A task that went to the dead set at the end of a run, as handed to a [`DeadHook`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadTask {
    /// Queue name.
    pub queue: String,
    /// Task id.
    pub id: String,
    /// The key it was pushed under.
    pub key: String,
    /// Runs it had, the last one included.
    pub attempts: u32,
    /// `permanent` or `retries-exhausted` (see [`crate::outcome::dead_reason`]).
    pub reason: String,
    /// The last run's error.
    pub error: String,
}

/// Called by the workers of a queue once for each run that sent its task to the dead set (a
/// permanent failure, retries exhausted, or a payload this build cannot decode), after the
/// engine recorded it, e.g. so the application counts dead tasks on its own records.
///
/// The hook runs in the worker's slot of the task that went dead: keep it short. A panic in it
/// is caught and logged. Tasks that go dead without a run ending (deadline exceeded, a lease
/// that expired on the last attempt, a corrupt record) do not call it.
pub type DeadHook = Arc<dyn Fn(DeadTask) -> BoxFuture<'static, ()> + Send + Sync>;
