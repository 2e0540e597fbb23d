//! Unit tests of `model/spot_state.rs`, and of the rules on a Config record and a VM that follow a
//! failover (`ConfigRecord::new_vm_attributes`, `outdated`).

use chrono::{Duration, TimeZone};

use super::*;
use crate::model::{ConfigRecord, Vm, outdated};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

fn rule(more_than: u32) -> SpotFailover {
    SpotFailover { unknown: Default::default(), more_than, within: Secs(600), cooldown: Secs(1800) }
}

use SpotEventKind::{Preempted, Refused};

#[test]
fn more_than_n_events_within_the_window_start_a_failover_until_the_cooldown() {
    let (r, mut s) = (rule(3), SpotState::default());
    for (i, kind) in [Preempted, Refused, Preempted].into_iter().enumerate() {
        assert_eq!(s.add(&r, &format!("h{i}"), kind, t0()), Added::Counted, "{i}: not more than 3 yet");
    }
    assert!(s.active(t0()).is_none());
    let now = t0() + Duration::minutes(9);
    assert_eq!(s.add(&r, "h3", Preempted, now), Added::Started);
    let f = s.active(now).expect("failed over").clone();
    assert_eq!(
        f,
        Failover {
            unknown: Default::default(),
            since: now,
            until: now + Duration::minutes(30),
            preempted: 3,
            refused: 1
        }
    );
    assert_eq!((s.preempted, s.refused, s.failovers), (3, 1, 1), "totals");
    assert_eq!(s.counted(&r, now), (0, 0), "the failover spent them");
    assert!(s.active(f.until - Duration::seconds(1)).is_some());
    assert!(s.active(f.until).is_none(), "over at the cooldown's end");
}

#[test]
fn events_older_than_the_window_do_not_count() {
    let (r, mut s) = (rule(1), SpotState::default());
    s.add(&r, "a", Preempted, t0());
    assert_eq!(s.add(&r, "b", Preempted, t0() + Duration::minutes(10)), Added::Counted, "a is 10m old");
    assert_eq!(s.add(&r, "c", Preempted, t0() + Duration::minutes(11)), Added::Started, "b and c");
}

#[test]
fn one_event_is_counted_once_however_often_it_is_told() {
    let (r, mut s) = (rule(1), SpotState::default());
    assert_eq!(s.add(&r, "linux-0-ab12", Preempted, t0()), Added::Counted);
    let before = s.clone();
    for later in [0, 5, 59] {
        let at = t0() + Duration::minutes(later);
        assert_eq!(s.add(&r, "linux-0-ab12", Preempted, at), Added::Seen, "{later}m later");
    }
    assert_eq!(s, before, "nothing changed");
    assert!(s.active(t0()).is_none(), "one preemption told twice is one");
}

#[test]
fn more_events_while_failed_over_make_it_last_longer_and_a_new_one_needs_new_events() {
    let (r, mut s) = (rule(1), SpotState::default());
    s.add(&r, "a", Preempted, t0());
    assert_eq!(s.add(&r, "b", Preempted, t0()), Added::Started);
    let later = t0() + Duration::minutes(20);
    assert_eq!(s.add(&r, "c", Refused, later), Added::Counted, "one new event is not more than 1");
    assert_eq!(s.add(&r, "d", Refused, later), Added::Lengthened);
    let f = s.active(later).unwrap().clone();
    assert_eq!((f.since, f.until, f.preempted, f.refused), (t0(), later + Duration::minutes(30), 0, 2));
    assert_eq!(s.failovers, 1, "the same failover");
    // Over: the events that made it are spent, so one more does not fail over again.
    let after = f.until + Duration::seconds(1);
    assert_eq!(s.ended(after), Some(f));
    assert_eq!(s.ended(after), None, "said once");
    assert_eq!(s.add(&r, "e", Preempted, after), Added::Counted);
    assert_eq!(s.add(&r, "f", Preempted, after), Added::Started);
    assert_eq!(s.failovers, 2);
}

#[test]
fn keys_are_kept_an_hour_and_the_list_is_bounded() {
    let (r, mut s) = (
        SpotFailover { unknown: Default::default(), more_than: 100, within: Secs(60), cooldown: Secs(60) },
        SpotState::default(),
    );
    s.add(&r, "old", Preempted, t0());
    assert_eq!(
        s.add(&r, "old", Preempted, t0() + Duration::minutes(59)),
        Added::Seen,
        "kept past the window"
    );
    s.add(&r, "new", Preempted, t0() + Duration::minutes(61));
    assert!(s.events.iter().all(|e| e.key != "old"), "forgotten after an hour");
    for i in 0..MAX_EVENTS + 10 {
        s.add(&r, &format!("k{i}"), Refused, t0() + Duration::minutes(61));
    }
    assert_eq!(s.events.len(), MAX_EVENTS);
    assert_eq!(s.events.last().unwrap().key, format!("k{}", MAX_EVENTS + 9), "the newest kept");
}

fn spot_record() -> ConfigRecord {
    let mut c = crate::testing::config("spot", 3);
    c.attributes.provisioning_model = "SPOT".into();
    c.attributes.instance_termination_action = "DELETE".into();
    c.spot_failover = Some(rule(3));
    ConfigRecord { config: c, ..ConfigRecord::default() }
}

#[test]
fn a_failed_over_pool_makes_standard_vms_and_spot_ones_again_after_the_cooldown() {
    let mut rec = spot_record();
    let (a, failover) = rec.new_vm_attributes("z", None, t0());
    assert!(!failover && a.provisioning_model == "SPOT" && a.instance_termination_action == "DELETE");
    rec.spot.failover = Some(Failover {
        unknown: Default::default(),
        since: t0(),
        until: t0() + Duration::minutes(30),
        preempted: 4,
        refused: 0,
    });
    let (a, failover) = rec.new_vm_attributes("z", None, t0());
    assert!(failover, "made for the failover");
    assert_eq!(
        (a.provisioning_model.as_str(), a.preemptible, a.instance_termination_action.as_str()),
        ("STANDARD", false, "")
    );
    assert!(!a.preemptible());
    assert_eq!(
        a,
        Attributes {
            provisioning_model: "STANDARD".into(),
            instance_termination_action: String::new(),
            ..rec.config.attributes_in("z")
        }
    );
    let (a, failover) = rec.new_vm_attributes("z", None, t0() + Duration::minutes(30));
    assert!(!failover && a.preemptible(), "Spot again");
    // Without spot_failover (removed from the Config) a stored failover does nothing.
    rec.config.spot_failover = None;
    assert!(!rec.new_vm_attributes("z", None, t0()).1);
}

use crate::config::Attributes;

#[test]
fn a_vm_made_by_a_failover_is_current_until_the_attributes_change() {
    let mut rec = spot_record();
    let vm = |failover: bool, a: Attributes| Vm { attributes: a, failover, ..Vm::default() };
    let spot = rec.config.attributes_in("z");
    let standard = spot.standard();
    assert!(!outdated(&rec.config, &vm(false, spot.clone())));
    assert!(!outdated(&rec.config, &vm(true, standard.clone())), "a failover VM is current");
    assert!(outdated(&rec.config, &vm(false, standard.clone())), "a standard VM of an older Config is not");
    rec.config.attributes.machine_type = "zones/{{.Zone}}/machineTypes/e2-medium".into();
    assert!(outdated(&rec.config, &vm(true, standard)), "made from older attributes: rolled");
}
