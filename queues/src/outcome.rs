//! How a handler's result becomes a queue resolution: the one place that maps outcomes.
//!
//! | handler returns | resolution |
//! |---|---|
//! | `Ok(Ran::Again(d))` (see [`Ran`]) | the same task again after `d`, with fresh attempts |
//! | `Ok(_)` (`Ran::Done` or anything else) | done |
//! | an error wrapping [`AbortError`] (see [`permanent`]; also a caught panic) | dead at once |
//! | an error wrapping [`RetryAfterError`] (see [`retry_after`]) | retried after that delay |
//! | any other error (including a timeout) | retried after the queue's backoff |
//!
//! Retries stop at the queue's `max_attempts`; the task then goes to the dead set. Which
//! resolutions end there is decided once, by [`dead_reason`].

use std::any::Any;
use std::time::Duration;

use apalis_core::error::{AbortError, BoxDynError, RetryAfterError};

use crate::engine::Resolution;
use crate::policy::Policy;

/// Marks an error as permanent: the task goes to the dead set without a retry.
pub fn permanent(error: impl Into<BoxDynError>) -> BoxDynError {
    Box::new(AbortError::new(error))
}

/// Asks for the next run after `delay` instead of the queue's backoff.
pub fn retry_after(error: impl Into<BoxDynError>, delay: Duration) -> BoxDynError {
    Box::new(RetryAfterError::new(error, delay))
}

/// How a run that succeeded ended, for handlers that follow work in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// Done.
    Done,
    /// Progress made: run the same task again after the delay (attempts are not spent on
    /// waiting; see [`Resolution::Again`]).
    Again(Duration),
}

/// The resolution of run number `attempt` that ended with `result`.
pub fn resolution<R: Any>(result: &Result<R, BoxDynError>, attempt: u32, policy: &Policy) -> Resolution {
    let e = match result {
        Ok(r) => {
            return match (r as &dyn Any).downcast_ref::<Ran>() {
                Some(Ran::Again(after)) => Resolution::Again { after: *after },
                _ => Resolution::Done,
            };
        }
        Err(e) => e,
    };
    let error = e.to_string();
    if e.downcast_ref::<AbortError>().is_some() {
        Resolution::Fail { error }
    } else if let Some(r) = e.downcast_ref::<RetryAfterError>() {
        Resolution::Retry { after: r.get_duration(), error }
    } else {
        Resolution::Retry { after: policy.backoff(attempt), error }
    }
}

/// Reason of a task that failed for good: a permanent error (or a caught panic).
pub const PERMANENT: &str = "permanent";
/// Reason of a task whose last allowed run failed.
pub const RETRIES_EXHAUSTED: &str = "retries-exhausted";

/// Why `resolution` of run number `attempt` sends its task to the dead set, or `None` when the
/// task lives on: [`PERMANENT`] for a failure marked permanent, [`RETRIES_EXHAUSTED`] for a retry
/// asked by run `max_attempts` or later. The engines apply the same rule (with the
/// `max_attempts` the task was pushed under).
pub fn dead_reason(resolution: &Resolution, attempt: u32, policy: &Policy) -> Option<&'static str> {
    match resolution {
        Resolution::Fail { .. } => Some(PERMANENT),
        Resolution::Retry { .. } if attempt >= policy.max_attempts => Some(RETRIES_EXHAUSTED),
        Resolution::Retry { .. }
        | Resolution::Done
        | Resolution::Release
        | Resolution::HandBack
        | Resolution::Again { .. } => None,
    }
}

#[cfg(test)]
mod tests;
