//! Unit tests of `api/series.rs`.

use super::*;
use chrono::TimeZone;

#[test]
fn a_queues_points_are_what_happened_between_two_samples() {
    let t = |m| chrono::Utc.with_ymd_and_hms(2026, 11, 21, 10, m, 0).unwrap();
    let s = |m, retried, failed, waiting| {
        Sample::of(
            t(m),
            &[
                (queue_value::RETRIED, retried),
                (queue_value::FAILED, failed),
                (queue_value::WAITING, waiting),
            ],
        )
    };
    let got = queue_points(&[s(0, 10, 1, 5), s(1, 13, 1, 2), s(2, 2, 0, 0)]);
    let p = |m, retries, failures, waiting| QueuePoint { at: t(m), retries, failures, waiting };
    assert_eq!(got, [p(1, 3, 0, 2), p(2, 0, 0, 0)], "a counter that went back (reset) counts none");
    assert!(queue_points(&[s(0, 1, 1, 1)]).is_empty(), "one sample: nothing happened between");
}
