//! Unit tests of `adapters/gce_retries.rs`.

use std::time::Duration;

use google_cloud_gax::backoff_policy::BackoffPolicy;
use google_cloud_gax::error::Error;
use google_cloud_gax::error::rpc::Status;
use google_cloud_gax::retry_policy::RetryPolicy;
use google_cloud_gax::retry_result::RetryResult;
use google_cloud_gax::retry_state::RetryState;

use super::{Answers, Retries};

const TIMEOUT: Duration = Duration::from_secs(30);

fn answered(status: u16) -> Error {
    Error::service_with_http_metadata(Status::default().set_message("answered"), Some(status), None)
}

/// An idempotent call's loop that started `ago`, after `attempts` attempts.
fn state(ago: Duration, attempts: u32) -> RetryState {
    RetryState::new(true).set_start(tokio::time::Instant::now().into_std() - ago).set_attempt_count(attempts)
}

fn flow(r: &RetryResult) -> &'static str {
    match r {
        RetryResult::Continue(_) => "continue",
        RetryResult::Exhausted(_) => "exhausted",
        RetryResult::Permanent(_) => "permanent",
    }
}

#[test]
fn answers_in_a_row_with_one_status_are_counted_and_a_new_status_starts_again() {
    let r = Retries::new(TIMEOUT);
    assert_eq!(r.answers(), None);
    for _ in 0..3 {
        r.on_error(&state(Duration::ZERO, 1), answered(503));
    }
    assert_eq!(r.answers(), Some(Answers { status: 503, times: 3 }));
    r.on_error(&state(Duration::ZERO, 4), answered(500));
    assert_eq!(r.answers(), Some(Answers { status: 500, times: 1 }));
    // A clone is the same call's policy: it shares the count.
    r.clone().on_error(&state(Duration::ZERO, 5), answered(500));
    assert_eq!(r.answers(), Some(Answers { status: 500, times: 2 }));
}

#[test]
fn a_503_is_retried_only_while_the_next_attempt_starts_within_half_the_timeout() {
    let r = Retries::new(TIMEOUT);
    assert_eq!(flow(&r.on_error(&state(Duration::ZERO, 1), answered(503))), "continue");
    // 11 s spent and up to 5 s of wait: it could start past 15 s.
    assert_eq!(flow(&r.on_error(&state(Duration::from_secs(11), 3), answered(503))), "exhausted");
    assert_eq!(flow(&r.on_error(&state(Duration::ZERO, 10), answered(503))), "exhausted", "10 attempts");
    // What the client does not retry is not retried: another status, a call that is not
    // idempotent.
    assert_eq!(flow(&r.on_error(&state(Duration::ZERO, 1), answered(400))), "permanent");
    let post = RetryState::new(false).set_attempt_count(1u32);
    assert_eq!(flow(&r.on_error(&post, answered(503))), "permanent");
}

#[test]
fn the_waits_double_up_to_a_sixth_of_the_timeout() {
    let r = Retries::new(TIMEOUT);
    for attempts in 1..=12 {
        let cap = Duration::from_secs(1).saturating_mul(1 << (attempts - 1)).min(Duration::from_secs(5));
        for _ in 0..20 {
            assert!(r.on_failure(&state(Duration::ZERO, attempts)) <= cap, "attempt {attempts}");
        }
    }
}
