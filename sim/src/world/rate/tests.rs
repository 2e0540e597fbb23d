//! Unit tests of `rate.rs`: the windows move with the world's clock only, so they are exact.

use super::*;
use crate::quota::{Limits, RateQuota};

const INSERT: &str = "compute.instances.insert";
const BULK: &str = "compute.regionInstances.bulkInsert";

/// A world with `quota`, its clock moved to the start of a whole minute.
fn world(quota: RateQuota) -> World {
    let mut w = World::new(SimConfig { quota, op_ms: 5000, ..SimConfig::default() }, Instant::now());
    let into = w.now_utc().timestamp_millis().rem_euclid(60_000) as u64;
    w.skip(Duration::from_millis(60_000 - into));
    w
}

fn bulk_body(n: usize) -> Value {
    json!({"count": 1, "namePattern": format!("b{n}-#"), "instanceProperties": {"machineType": "e2-small"}})
}

#[test]
fn a_group_over_its_minute_is_refused_until_the_next_minute() {
    let mut w = world(RateQuota::gce_default());
    for _ in 0..1500 {
        w.admit("p", INSERT).unwrap();
    }
    let e = w.admit("p", "compute.instances.delete").unwrap_err();
    assert_eq!((e.status, e.reason), (403, "rateLimitExceeded"), "{}", e.message);
    assert!(e.message.contains("Queries"), "{}", e.message);
    w.admit("p", "compute.instances.get").unwrap();
    w.admit("q", INSERT).unwrap();
    w.skip(Duration::from_millis(59_999));
    assert!(w.admit("p", INSERT).is_err(), "still the same minute");
    w.skip(Duration::from_millis(1));
    w.admit("p", INSERT).unwrap();
    assert_eq!(w.api_calls().requests["p"], [1503, 1, 0, 0], "every call counted, taken or not");
    assert_eq!(w.api_calls().rate_limited.values().sum::<u64>(), 2);
    assert_eq!(w.api_calls().rate_limited[INSERT], 1);
    assert_eq!(w.api_calls().rate_limited["compute.instances.delete"], 1);
}

#[test]
fn no_quota_takes_everything_and_still_counts() {
    let mut w = world(RateQuota::none());
    for _ in 0..3000 {
        w.admit("p", "compute.zoneOperations.get").unwrap();
    }
    w.admit("p", "swarming.GetBot").unwrap();
    assert_eq!(w.api_calls().requests["p"], [0, 0, 0, 3000], "Swarming's calls are not Compute's");
    assert!(w.api_calls().rate_limited.is_empty());
}

#[test]
fn bulk_inserts_are_held_to_their_second_and_to_those_running() {
    let per_second = Limits { bulk_running: 0, ..Limits::GCE_DEFAULT };
    let mut w = world(RateQuota { default: Some(per_second), ..RateQuota::gce_default() });
    for _ in 0..20 {
        w.admit("p", BULK).unwrap();
    }
    let e = w.admit("p", BULK).unwrap_err();
    assert!(e.message.contains("20 bulk insert requests a second"), "{}", e.message);
    w.admit("p", INSERT).unwrap();
    w.skip(Duration::from_secs(1));
    w.admit("p", BULK).unwrap();

    let mut w = world(RateQuota::gce_default());
    for n in 0..10 {
        w.admit("p", BULK).unwrap();
        w.bulk_insert("p", Scope::Region, "us-central1", None, &bulk_body(n)).unwrap();
        w.skip(Duration::from_millis(200));
    }
    let e = w.admit("p", BULK).unwrap_err();
    assert!(e.message.contains("10 bulk insert operations running"), "{}", e.message);
    w.admit("q", BULK).unwrap();
    w.skip(Duration::from_millis(3500)); // the first operations are DONE after op_ms
    w.admit("p", BULK).unwrap();
    assert_eq!(w.api_calls().rate_limited[BULK], 1);
}
