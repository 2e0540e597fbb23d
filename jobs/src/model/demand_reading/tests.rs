//! The demand target rule.

use chrono::{TimeZone, Utc};

use super::*;
use crate::config::Secs;

fn demand(min_idle: u32, per_bot: u32) -> Demand {
    Demand { min_idle, per_bot, idle_timeout: Secs(600), ..Demand::default() }
}

#[test]
fn the_target_is_busy_plus_pending_per_bot_plus_min_idle() {
    let now = Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap();
    let r = Reading { pending: 7, busy: 3, idle: 0, idle_long: 0, seen_idle: 0, live: 3, parks: false };
    assert_eq!(DemandState::read(&demand(2, 1), r, None, now).target, 12);
    // Seven tasks, two a bot: four bots.
    assert_eq!(DemandState::read(&demand(0, 2), r, None, now).target, 7);
    let s = DemandState::read(&demand(2, 1), r, None, now);
    assert_eq!(s.why, "busy 3 + pending 7 + min_idle 2");
    assert_eq!(s.held, None);
}

#[test]
fn it_shrinks_only_by_bots_idle_longer_than_the_timeout() {
    let now = Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap();
    // Ten live, one busy, nine idle of which four for long: 10 - 4 = 6, not 1.
    let r = Reading { pending: 0, busy: 1, idle: 9, idle_long: 4, seen_idle: 9, live: 10, parks: false };
    let s = DemandState::read(&demand(0, 1), r, None, now);
    assert_eq!(s.target, 6);
    assert!(s.why.contains("5 idle ≤ 600s"), "{}", s.why);
    // Booting VMs count as capacity: five live, none connected, three pending: no more made.
    let booting = Reading { pending: 3, busy: 0, idle: 0, idle_long: 0, seen_idle: 0, live: 5, parks: false };
    assert_eq!(DemandState::read(&demand(0, 1), booting, None, now).target, 5);
}

#[test]
fn an_outage_holds_the_last_target_and_keeps_its_start() {
    let t0 = Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap();
    let r = Reading { pending: 4, busy: 4, idle: 0, idle_long: 0, seen_idle: 0, live: 8, parks: false };
    let read = DemandState::read(&demand(0, 1), r, None, t0);
    let held = DemandState::held(Some(&read), 1, "unavailable", t0 + chrono::Duration::minutes(1));
    assert_eq!((held.target, held.held), (8, Some(t0 + chrono::Duration::minutes(1))));
    let later = DemandState::held(Some(&held), 1, "unavailable", t0 + chrono::Duration::minutes(5));
    assert_eq!((later.target, later.held), (8, held.held));
    // Never read: the amount it has now.
    assert_eq!(DemandState::held(None, 3, "unavailable", t0).target, 3);
    assert!(!later.differs(&held) && held.differs(&read));
}

#[test]
fn tasks_bots_idle_for_long_do_not_take_stop_counting_after_idle_timeout() {
    let t0 = Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap();
    let d = demand(0, 1);
    // Five pending, three bots idle past the timeout: at first counted (they may be about to
    // take them: a burst after a quiet night)...
    let r = Reading { pending: 5, busy: 0, idle: 3, idle_long: 3, seen_idle: 3, live: 3, parks: false };
    let first = DemandState::read(&d, r, None, t0);
    assert_eq!((first.target, first.unserved_since), (5, Some(t0)));
    let later = DemandState::read(&d, r, Some(&first), t0 + chrono::Duration::minutes(5));
    assert_eq!(later.target, 5);
    // ... but still there a timeout later: these bots do not take them; not counted.
    let stuck = DemandState::read(&d, r, Some(&later), t0 + chrono::Duration::minutes(10));
    assert_eq!(stuck.target, 0, "{}", stuck.why);
    assert!(stuck.why.contains("5 pending not counted"), "{}", stuck.why);
    // Taken at last: counting starts again.
    let taken = Reading { pending: 0, busy: 3, idle: 0, idle_long: 0, seen_idle: 0, live: 3, parks: false };
    assert_eq!(
        DemandState::read(&d, taken, Some(&stuck), t0 + chrono::Duration::minutes(11)).unserved_since,
        None
    );
}

#[test]
fn spare_steps_follow_the_idle_bots_reading_by_reading() {
    let t = |s| Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap() + chrono::TimeDelta::seconds(s);
    let timeout = chrono::TimeDelta::seconds(60);
    // 3 idle at 0 s, 5 at 10 s: 3 since 0, 2 more since 10.
    let s = spare_after(&[], 3, t(0), timeout);
    let s = spare_after(&s, 5, t(10), timeout);
    assert_eq!(s, [(t(0), 3), (t(10), 5)]);
    assert_eq!((spare_long(&s, t(59), timeout), spare_long(&s, t(60), timeout)), (0, 3));
    assert_eq!(spare_long(&s, t(70), timeout), 5);
    // Down to 2 at 20 s: the levels above end; up to 4 again at 30 s: 2 more since 30.
    let s = spare_after(&s, 2, t(20), timeout);
    assert_eq!(s, [(t(0), 2)]);
    let s = spare_after(&s, 4, t(30), timeout);
    assert_eq!(s, [(t(0), 2), (t(30), 4)]);
    // None idle: nothing to spare.
    assert_eq!(spare_after(&s, 0, t(40), timeout), []);
    // Steps past the timeout merge into one, the highest: 4 since 30 at 100 s.
    let s = spare_after(&[(t(0), 2), (t(30), 4), (t(90), 6)], 7, t(100), timeout);
    assert_eq!(s, [(t(30), 4), (t(90), 6), (t(100), 7)]);
    // Past the most steps the oldest young step merges into the next (younger, never older).
    let mut s = vec![(t(0), 1)];
    for k in 1..=SPARE_STEPS as i64 + 5 {
        s = spare_after(&s, k as u32 + 1, t(60) + chrono::TimeDelta::milliseconds(k), timeout);
    }
    assert_eq!(s.len(), SPARE_STEPS);
    assert_eq!(s[0], (t(0), 1));
    assert_eq!(s.last().unwrap().1, SPARE_STEPS as u32 + 6);
    assert!(s.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1), "{s:?}");
}

#[test]
fn a_warm_pool_lets_go_bots_idle_together_for_the_timeout_though_none_idled_that_long() {
    let t = |s| Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap() + chrono::TimeDelta::seconds(s);
    let d = Demand { idle_timeout: Secs(60), ..demand(2, 1) };
    // Ten VMs, four busy, six idle; tasks hop between the idle bots (each starts on one and
    // another ends), so none is idle 60 s, but six are idle at every reading.
    let r = Reading { pending: 0, busy: 4, idle: 6, idle_long: 0, seen_idle: 6, live: 10, parks: true };
    let mut s = DemandState::read(&d, r, None, t(0));
    for at in (10..60).step_by(10) {
        s = DemandState::read(&d, r, Some(&s), t(at));
        assert_eq!(s.target, 10, "at {at} s: {}", s.why);
    }
    // A timeout on: six to spare, all but min_idle go.
    s = DemandState::read(&d, r, Some(&s), t(60));
    assert_eq!(s.target, 6, "{}", s.why);
    assert!(s.why.contains("6 idle together at every reading of the last 60s"), "{}", s.why);
    // Without a warm pool (a VM let go would come back as a boot) each bot's idle time rules.
    let kept = Reading { parks: false, ..r };
    let mut s = DemandState::read(&d, kept, None, t(0));
    s = DemandState::read(&d, kept, Some(&s), t(120));
    assert_eq!((s.target, s.spare.len()), (10, 0), "{}", s.why);
    // Had a reading found only three idle, only three were to spare: seven kept.
    let dip = Reading { busy: 7, idle: 3, seen_idle: 3, ..r };
    let mut s = DemandState::read(&d, r, None, t(0));
    s = DemandState::read(&d, dip, Some(&s), t(30));
    s = DemandState::read(&d, r, Some(&s), t(60));
    assert_eq!(s.target, 7, "{}", s.why);
    // Bots not seen idle by a fresh walk (a failed walk, or not seen yet) are never to spare.
    let unseen = Reading { seen_idle: 0, ..r };
    let mut s = DemandState::read(&d, unseen, None, t(0));
    s = DemandState::read(&d, unseen, Some(&s), t(120));
    assert_eq!(s.target, 10, "{}", s.why);
    // An outage forgets them: counted again from the next reading.
    let mut s = DemandState::read(&d, r, None, t(0));
    s = DemandState::held(Some(&s), 10, "unavailable", t(30));
    s = DemandState::read(&d, r, Some(&s), t(60));
    assert_eq!(s.target, 10, "{}", s.why);
}
