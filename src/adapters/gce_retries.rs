//! How the Compute client retries one call, and what it was answered meanwhile.
//!
//! Each call gets its own [`Retries`], given to the client as that call's retry and backoff
//! policies. It retries what the client retries by default (AIP-194: an idempotent call answered
//! 503 or cut off, any call that never left) and counts the HTTP error answers, but starts an
//! attempt only while its answer can still come back well within the guard's timeout
//! (`[isolation] compute_timeout`): a storm of 503 answers comes back as the last 503 with how
//! many there were, never as the guard's timeout. A call that gets no answer still runs into
//! that timeout (no attempt is cut short here).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use google_cloud_gax::backoff_policy::BackoffPolicy;
use google_cloud_gax::error::Error;
use google_cloud_gax::retry_policy::{Aip194Strict, RetryPolicy};
use google_cloud_gax::retry_result::RetryResult;
use google_cloud_gax::retry_state::RetryState;
use google_cloud_gax::throttle_result::ThrottleResult;

/// Attempts of one call at most (the client's own default).
const ATTEMPTS: u32 = 10;

/// The HTTP error answers of one call: the last one's status, and how many times in a row the
/// call was answered with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Answers {
    /// The HTTP status.
    pub(super) status: u16,
    /// How many answers in a row had it (at least 1).
    pub(super) times: u32,
}

/// One call's retry and backoff policy, and the answers it saw (clones share them).
#[derive(Debug, Clone)]
pub(super) struct Retries {
    timeout: Duration,
    answers: Arc<Mutex<Option<Answers>>>,
}

impl Retries {
    /// The policy of one call that the guard cuts after `timeout`.
    pub(super) fn new(timeout: Duration) -> Self {
        Self { timeout, answers: Arc::default() }
    }

    /// The HTTP error answers seen so far.
    pub(super) fn answers(&self) -> Option<Answers> {
        *self.answers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first wait between two attempts: a thirtieth of the timeout (1 s of 30 s).
    fn first_wait(&self) -> Duration {
        self.timeout / 30
    }

    /// The longest wait between two attempts: a sixth of the timeout (5 s of 30 s).
    fn longest_wait(&self) -> Duration {
        self.timeout / 6
    }

    /// Whether one more attempt fits: it starts, after its wait, within the first half of the
    /// timeout, which leaves the other half for its answer.
    fn room(&self, state: &RetryState) -> bool {
        // The client starts the loop's clock on tokio's (so do we: a paused test clock holds).
        let spent = tokio::time::Instant::now().into_std().saturating_duration_since(state.start);
        state.attempt_count < ATTEMPTS && spent + self.longest_wait() <= self.timeout / 2
    }

    /// Counts `error` when it is an HTTP answer.
    fn count(&self, error: &Error) {
        let Some(status) = error.http_status_code() else { return };
        let mut seen = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        *seen = Some(match *seen {
            Some(a) if a.status == status => Answers { status, times: a.times.saturating_add(1) },
            _ => Answers { status, times: 1 },
        });
    }
}

impl RetryPolicy for Retries {
    fn on_error(&self, state: &RetryState, error: Error) -> RetryResult {
        self.count(&error);
        match Aip194Strict.on_error(state, error) {
            RetryResult::Continue(e) if !self.room(state) => RetryResult::Exhausted(e),
            flow => flow,
        }
    }

    fn on_throttle(&self, state: &RetryState, error: Error) -> ThrottleResult {
        match self.room(state) {
            true => ThrottleResult::Continue(error),
            false => ThrottleResult::Exhausted(error),
        }
    }
}

impl BackoffPolicy for Retries {
    /// Doubles from [`Retries::first_wait`] up to [`Retries::longest_wait`], with full jitter.
    fn on_failure(&self, state: &RetryState) -> Duration {
        let doublings = state.attempt_count.saturating_sub(1).min(16);
        let wait = self.first_wait().saturating_mul(1 << doublings).min(self.longest_wait());
        rand::random_range(Duration::ZERO..=wait)
    }
}

#[cfg(test)]
mod tests;
