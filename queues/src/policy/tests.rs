//! Unit tests of `policy.rs`.

use super::*;

#[test]
fn backoff_grows_exponentially_with_jitter_and_stops_at_the_cap() {
    let p = Policy {
        backoff_base: Duration::from_millis(100),
        backoff_cap: Duration::from_millis(1000),
        ..Policy::default()
    };
    for _ in 0..200 {
        let first = p.backoff(1);
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
        let third = p.backoff(3);
        assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
        let late = p.backoff(40);
        assert!(late >= Duration::from_millis(500) && late <= Duration::from_millis(1000));
    }
    let draws: std::collections::HashSet<_> = (0..50).map(|_| p.backoff(5)).collect();
    assert!(draws.len() > 1, "jitter must vary the delay");
}

#[test]
fn durations_are_written_with_units_or_as_milliseconds() {
    let p: Policy =
        serde_json::from_str(r#"{"lease": "45s", "backoff_cap": "5m", "timeout": 600000}"#).unwrap();
    assert_eq!(p.lease, Duration::from_secs(45));
    assert_eq!(p.backoff_cap, Duration::from_secs(300));
    assert_eq!(p.timeout, Duration::from_secs(600));
    assert_eq!(millis::parse("250ms").unwrap(), Duration::from_millis(250));
    assert!(serde_json::from_str::<Policy>(r#"{"lease": "45 parsecs"}"#).is_err());
}

#[test]
fn invalid_policies_are_rejected_with_the_field_named() {
    let bad = Policy { max_attempts: 0, ..Policy::default() };
    assert!(bad.validate().unwrap_err().contains("max_attempts"));
    let bad = Policy { lease: Duration::from_millis(10), ..Policy::default() };
    assert!(bad.validate().unwrap_err().contains("lease"));
    assert!(Policy::default().validate().is_ok());
}
