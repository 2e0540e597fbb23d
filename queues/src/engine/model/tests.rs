//! Unit tests of `engine/model.rs`.

use chrono::TimeZone;

use super::*;

#[test]
fn queue_names_are_checked() {
    assert!(QueueSpec::new("create_instance", Policy::default()).is_ok());
    for bad in ["", "Upper", "a:b", "a{b}", &"x".repeat(65)] {
        let err = QueueSpec::new(bad, Policy::default()).unwrap_err();
        assert!(matches!(err, QueueError::Invalid(_)), "{bad}");
    }
}

#[test]
fn when_converts_to_a_delay() {
    let now = Utc.timestamp_millis_opt(10_000).unwrap();
    assert_eq!(When::Now.delay_ms(now), 0);
    assert_eq!(When::After(Duration::from_millis(1500)).delay_ms(now), 1500);
    assert_eq!(When::At(Utc.timestamp_millis_opt(12_000).unwrap()).delay_ms(now), 2000);
    assert_eq!(When::At(Utc.timestamp_millis_opt(1_000).unwrap()).delay_ms(now), 0);
}
