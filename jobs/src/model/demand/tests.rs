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
    let r = Reading { pending: 7, busy: 3, idle: 0, idle_long: 0, live: 3 };
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
    let r = Reading { pending: 0, busy: 1, idle: 9, idle_long: 4, live: 10 };
    let s = DemandState::read(&demand(0, 1), r, None, now);
    assert_eq!(s.target, 6);
    assert!(s.why.contains("5 idle ≤ 600s"), "{}", s.why);
    // Booting VMs count as capacity: five live, none connected, three pending: no more made.
    let booting = Reading { pending: 3, busy: 0, idle: 0, idle_long: 0, live: 5 };
    assert_eq!(DemandState::read(&demand(0, 1), booting, None, now).target, 5);
}

#[test]
fn an_outage_holds_the_last_target_and_keeps_its_start() {
    let t0 = Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap();
    let r = Reading { pending: 4, busy: 4, idle: 0, idle_long: 0, live: 8 };
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
    let r = Reading { pending: 5, busy: 0, idle: 3, idle_long: 3, live: 3 };
    let first = DemandState::read(&d, r, None, t0);
    assert_eq!((first.target, first.unserved_since), (5, Some(t0)));
    let later = DemandState::read(&d, r, Some(&first), t0 + chrono::Duration::minutes(5));
    assert_eq!(later.target, 5);
    // ... but still there a timeout later: these bots do not take them; not counted.
    let stuck = DemandState::read(&d, r, Some(&later), t0 + chrono::Duration::minutes(10));
    assert_eq!(stuck.target, 0, "{}", stuck.why);
    assert!(stuck.why.contains("5 pending not counted"), "{}", stuck.why);
    // Taken at last: counting starts again.
    let taken = Reading { pending: 0, busy: 3, idle: 0, idle_long: 0, live: 3 };
    assert_eq!(
        DemandState::read(&d, taken, Some(&stuck), t0 + chrono::Duration::minutes(11)).unserved_since,
        None
    );
}
