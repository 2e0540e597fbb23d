//! Unit tests of `ports/compute.rs`.

use super::*;

#[test]
fn errors_are_classified_once_here() {
    let k = |h: Option<u16>, r: &str| ComputeError::from_http(h, r, "m").kind;
    assert_eq!(k(Some(404), "notFound"), Kind::NotFound);
    assert_eq!(k(Some(409), "alreadyExists"), Kind::AlreadyExists);
    assert_eq!(k(Some(403), "rateLimitExceeded"), Kind::RateLimited);
    assert_eq!(k(Some(429), ""), Kind::RateLimited);
    assert_eq!(k(Some(503), "backendError"), Kind::Transient);
    assert_eq!(k(None, ""), Kind::Transient);
    assert_eq!(k(Some(403), "quotaExceeded"), Kind::Quota);
    assert_eq!(k(Some(400), "invalid"), Kind::Invalid);
    // A refused token is retried with a fresh one; a missing scope is not retried.
    assert_eq!(k(Some(401), "authError"), Kind::Transient);
    assert_eq!(k(Some(403), "insufficientPermissions"), Kind::Invalid);
    let o = |c: &str, h: Option<u16>| ComputeError::from_operation(c, h, "m").kind;
    assert_eq!(o("QUOTA_EXCEEDED", Some(403)), Kind::Quota);
    assert_eq!(o("ZONE_RESOURCE_POOL_EXHAUSTED", Some(503)), Kind::Stockout);
    assert_eq!(o("INTERNAL_ERROR", Some(500)), Kind::Transient);
    assert_eq!(o("RESOURCE_NOT_FOUND", Some(404)), Kind::Invalid);
}

#[test]
fn an_answered_error_says_its_status_its_reason_phrase_and_how_many_times() {
    let e = ComputeError::answered(503, "Service Unavailable", "backendError", "Try again.", 4);
    assert_eq!((e.kind, e.code.as_str()), (Kind::Transient, "503"));
    assert_eq!(e.message, "503 Service Unavailable: Try again. (×4 within this attempt)");
    // Classified by Compute's own message, not the one it is shown in.
    let rate = ComputeError::answered(403, "Forbidden", "", "Rate Limit Exceeded", 1);
    assert_eq!(rate.kind, Kind::RateLimited);
    assert_eq!(ComputeError::answered(599, "", "", "m", 1).message, "599: m (×1 within this attempt)");
}

#[test]
fn the_count_of_answers_is_left_out_when_faults_are_compared() {
    let e = ComputeError::answered(503, "Service Unavailable", "backendError", "Internal error.", 4);
    let again = ComputeError::answered(503, "Service Unavailable", "backendError", "Internal error.", 7);
    assert_ne!(e.message, again.message);
    let wrapped = |m: &str| format!("project p: {m}");
    assert_eq!(
        ComputeError::without_count(&wrapped(&e.message)),
        ComputeError::without_count(&wrapped(&again.message))
    );
    assert_eq!(ComputeError::without_count(&e.message), "503 Service Unavailable: Internal error.");
    for other in ["no answer within 30s", "x (×a within this attempt)", "(×4 within this attempt)"] {
        assert_eq!(ComputeError::without_count(other), other);
    }
}
