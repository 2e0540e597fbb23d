//! Unit tests of `bulk.rs`: placement by shape, `maxCount`, ALLOW, and the largest bulk.

use super::*;
use crate::quota::RateQuota;

fn world() -> World {
    World::new(SimConfig { quota: RateQuota::none(), ..SimConfig::default() }, Instant::now())
}

fn body(count: u64, policy: Value) -> Value {
    json!({"count": count, "minCount": 1, "namePattern": "v-####", "instanceProperties": {"machineType": "e2-small"},
           "locationPolicy": policy})
}

/// Instances by zone.
fn by_zone(w: &World) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (_, zone, _) in w.instances.keys() {
        *out.entry(zone.clone()).or_default() += 1;
    }
    out
}

fn zones(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(z, n)| (z.to_string(), *n)).collect()
}

#[test]
fn any_fills_the_first_zone_up_to_its_max_count_then_the_next() {
    let mut w = world();
    let policy =
        json!({"targetShape": "ANY", "locations": {"zones/us-central1-a": {"constraints": {"maxCount": 2}}}});
    let op = w.bulk_insert("p", Scope::Region, "us-central1", None, &body(5, policy)).unwrap();
    assert_eq!(by_zone(&w), zones(&[("us-central1-a", 2), ("us-central1-b", 3)]));
    let outcome = w.operations[&op].bulk.clone().unwrap();
    assert_eq!(outcome.zones["us-central1-a"], ZoneOutcome { target: 2, created: 2, failed: 0, deleted: 0 });
}

#[test]
fn balanced_spreads_over_the_allowed_zones_and_single_zone_keeps_one() {
    let mut w = world();
    let allow = json!({"preference": "ALLOW"});
    let policy = json!({"targetShape": "BALANCED", "locations": {"zones/us-central1-b": allow, "zones/us-central1-c": allow}});
    w.bulk_insert("p", Scope::Region, "us-central1", None, &body(5, policy)).unwrap();
    assert_eq!(
        by_zone(&w),
        zones(&[("us-central1-b", 3), ("us-central1-c", 2)]),
        "only ALLOW'd zones, evenly"
    );

    let mut w = world();
    w.faults.stockouts.insert("us-central1-a".into());
    w.bulk_insert("p", Scope::Region, "us-central1", None, &body(4, json!({}))).unwrap();
    assert_eq!(by_zone(&w), zones(&[("us-central1-b", 4)]), "all in the first zone with room");
}

#[test]
fn a_pattern_numbers_after_the_largest_name_in_the_zones_and_refuses_past_its_width() {
    let mut w = world();
    let small = |name: &str| json!({"name": name, "machineType": "e2-small"});
    w.insert("p", "us-central1-c", None, &small("v-0041")).unwrap();
    w.insert("p", "us-central1-c", None, &small("v-041")).unwrap(); // another width: no match
    w.insert("q", "us-central1-a", None, &small("v-0099")).unwrap(); // another project
    w.bulk_insert("p", Scope::Region, "us-central1", None, &body(2, json!({}))).unwrap();
    assert!(w.instances.contains_key(&key_of("p", "us-central1-a", "v-0042")));
    assert!(w.instances.contains_key(&key_of("p", "us-central1-a", "v-0043")));
    let pattern =
        json!({"count": 2, "namePattern": "w-#", "instanceProperties": {"machineType": "e2-small"}});
    w.bulk_insert(
        "p",
        Scope::Zone,
        "us-central1-b",
        None,
        &json!({"count": 8, "namePattern": "w-#",
        "instanceProperties": {"machineType": "e2-small"}}),
    )
    .unwrap();
    let e = w.bulk_insert("p", Scope::Zone, "us-central1-b", None, &pattern).unwrap_err();
    assert_eq!((e.status, e.reason), (400, "invalid"), "w-9 is the last: {}", e.message);
}

#[test]
fn the_largest_bulk_makes_5000_instances_with_an_operation_each() {
    let mut w = world();
    let op = w.bulk_insert("p", Scope::Zone, "us-central1-b", None, &body(5000, json!({}))).unwrap();
    assert_eq!(w.instances.len(), 5000);
    let group = w.operations[&op].group.clone();
    let inserts = w.operations.values().filter(|o| o.kind == "insert" && o.group == group).count();
    assert_eq!(inserts, 5000);
    w.advance(w.now() + Duration::from_secs(5));
    assert_eq!(w.operations[&op].status, OpStatus::Done);
    assert!(w.instances.values().all(|i| i.status == Status::Running));
}
