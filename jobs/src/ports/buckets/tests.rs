//! Unit tests of `ports/buckets.rs`.

use super::*;

const R: Rate = Rate { rate: 10.0, burst: 2 };

#[test]
fn a_bucket_gives_its_burst_then_its_rate_and_a_rate_limit_halves_it() {
    let (b, w) = Bucket::step(None, 0, R, false);
    assert_eq!((b.tokens, w), (1.0, Duration::ZERO));
    let (b, w) = Bucket::step(Some(b), 0, R, false);
    assert_eq!((b.tokens, w), (0.0, Duration::ZERO), "the burst of 2");
    let (b, w) = Bucket::step(Some(b), 0, R, false);
    assert_eq!(w, Duration::from_millis(100), "then one per 1/rate");
    assert_eq!((b.waits, b.waited_ms, b.slowed), (1, 0, 0), "a call found it empty");
    let (b, w) = Bucket::step(Some(b), 100, R, false);
    assert_eq!(w, Duration::ZERO);
    // 403 rateLimitExceeded: half the rate, nothing saved.
    let (b, _) = Bucket::step(Some(b), 100, R, true);
    assert_eq!(b.rate, 5.0);
    let level = b.level(R);
    assert_eq!((level.slowed, level.waits, level.configured, level.rate), (1, 1, 10.0, 5.0));
    assert_eq!(level.last_slowed.map(|t| t.timestamp_millis()), Some(100));
    let (b, w) = Bucket::step(Some(b), 100, R, false);
    assert_eq!(w, Duration::from_millis(200), "a token per 1/(rate/2)");
    // It grows back: a twentieth of the rate per second, up to the rate.
    let (b, _) = Bucket::step(Some(b), 10_100, R, false);
    assert_eq!(b.rate, 10.0);
    // Never below a twentieth.
    let mut b = b;
    for _ in 0..10 {
        b = Bucket::step(Some(b), 10_100, R, true).0;
    }
    assert_eq!(b.rate, 0.5);
}
