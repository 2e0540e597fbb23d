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
        Resolution::Retry { .. } | Resolution::Done | Resolution::Release | Resolution::Again { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_result_maps_to_its_resolution() {
        let p = Policy { backoff_base: Duration::from_millis(100), ..Policy::default() };
        assert_eq!(resolution::<()>(&Ok(()), 1, &p), Resolution::Done);
        assert_eq!(resolution(&Ok(Ran::Done), 1, &p), Resolution::Done);
        let again = resolution(&Ok(Ran::Again(Duration::from_millis(250))), 3, &p);
        assert_eq!(again, Resolution::Again { after: Duration::from_millis(250) });
        let dead = resolution::<()>(&Err(permanent("bad config")), 1, &p);
        assert!(matches!(dead, Resolution::Fail { error } if error.contains("bad config")));
        let later = resolution::<()>(&Err(retry_after("429", Duration::from_secs(7))), 1, &p);
        assert!(matches!(later, Resolution::Retry { after, .. } if after == Duration::from_secs(7)));
        let plain = resolution::<()>(&Err("503".into()), 2, &p);
        assert!(
            matches!(plain, Resolution::Retry { after, .. } if after >= Duration::from_millis(100) && after <= Duration::from_millis(200))
        );
    }

    #[test]
    fn only_permanent_failures_and_the_last_retry_are_dead() {
        let p = Policy { max_attempts: 3, ..Policy::default() };
        let retry = Resolution::Retry { after: Duration::ZERO, error: "503".into() };
        assert_eq!(dead_reason(&retry, 2, &p), None);
        assert_eq!(dead_reason(&retry, 3, &p), Some(RETRIES_EXHAUSTED));
        assert_eq!(dead_reason(&Resolution::Fail { error: "bad".into() }, 1, &p), Some(PERMANENT));
        assert_eq!(dead_reason(&Resolution::Done, 3, &p), None);
        assert_eq!(dead_reason(&Resolution::Release, 3, &p), None);
    }
}
