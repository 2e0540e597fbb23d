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
