//! Unit tests of `outcome.rs`.

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
