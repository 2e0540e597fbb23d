//! What the fetch side ([`super::QueueBackend`]) and the ack side (`ack.rs`) of a worker share:
//! the [`Lease`] attached to each task, the tasks the worker holds, and the backoff after engine
//! errors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// First wait after an engine error; it doubles up to [`MAX_ERROR_DELAY`].
pub(super) const FIRST_ERROR_DELAY: Duration = Duration::from_millis(50);
/// Longest wait after engine errors.
pub(super) const MAX_ERROR_DELAY: Duration = Duration::from_secs(5);

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
    /// How long it waited from when it was due until it was taken, in milliseconds.
    pub waited_ms: u64,
    /// When this worker took it (it may wait in the worker's buffer before its handler starts).
    pub taken: Instant,
}

/// A task this worker holds.
#[derive(Debug, Clone)]
pub(super) struct Hold {
    /// Its lease token.
    pub(super) token: String,
    /// Since when.
    pub(super) since: Instant,
    /// Its handler was called (a task still buffered has not started: a stop releases it,
    /// while a started one cut short is handed back).
    pub(super) started: bool,
    /// Its run ended and its ack is on the way: a renewal that finds its lease gone raced the
    /// ack, and nothing was lost.
    pub(super) acking: bool,
}

/// Tasks this worker holds, by id.
pub(super) type Held = Arc<Mutex<HashMap<String, Hold>>>;

/// Locks the held tasks (a poisoned lock is reused: every change is one map operation).
pub(super) fn held_lock(h: &Mutex<HashMap<String, Hold>>) -> MutexGuard<'_, HashMap<String, Hold>> {
    h.lock().unwrap_or_else(|e| e.into_inner())
}
