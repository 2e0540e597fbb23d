//! Unit tests of `episodes.rs`.

use super::*;

#[test]
fn a_condition_starts_once_is_summed_up_every_minute_and_ends_once() {
    let e = Episodes::default();
    let t0 = Instant::now();
    let s = Duration::from_secs;
    assert_eq!(e.held("zone p/a", t0), Held::Began);
    for i in 1..=100 {
        assert_eq!(e.held("zone p/a", t0 + s(i * 59 / 100)), Held::Quiet, "{i}");
    }
    assert_eq!(e.held("zone p/b", t0), Held::Began, "another key is its own episode");
    assert_eq!(e.held("zone p/a", t0 + s(60)), Held::Summary { held: 101, over: s(60) });
    assert_eq!(e.held("zone p/a", t0 + s(61)), Held::Quiet);
    assert_eq!(e.held("zone p/a", t0 + s(125)), Held::Summary { held: 2, over: s(65) });
    assert_eq!(e.end("zone p/a", t0 + s(130)), Some(Ended { held: 104, lasted: s(130) }));
    assert_eq!(e.end("zone p/a", t0 + s(131)), None, "ended once");
    assert_eq!(e.held("zone p/a", t0 + s(132)), Held::Began, "a new episode after the end");
    assert_eq!(e.held("zone p/b", t0 + s(1)), Held::Quiet, "the other one goes on");
    assert!(e.begin("circuit p", t0) && !e.begin("circuit p", t0 + s(1)), "begun once");
    assert_eq!(e.held("circuit p", t0 + s(2)), Held::Quiet, "begun without a task: no second start");
}
