//! Unit tests of `providers/gce_bulk.rs`: the requestId rule, the forming of bulks.

use super::*;

fn vm(index: u32, zone: &str, attempt: u32) -> Versioned<Vm> {
    let mut v = Vm {
        id: format!("linux-{index}"),
        config: "linux".into(),
        index,
        hostname: format!("linux-{index}-abcd"),
        insert_attempt: attempt,
        ..Vm::default()
    };
    v.attributes.project = "p".into();
    v.attributes.zone = zone.into();
    Versioned { value: v, version: 1 }
}

#[test]
fn a_bulk_s_request_id_is_its_members_and_their_attempts_in_any_order() {
    let (a, b, c) = (vm(0, "z", 0).value, vm(1, "z", 0).value, vm(2, "z", 0).value);
    let rid = bulk_request_id(&[&a, &b, &c]);
    assert_eq!(rid, bulk_request_id(&[&c, &a, &b]), "the same members: the same request");
    assert_ne!(rid, bulk_request_id(&[&a, &b]), "other members: another request");
    let b_again = vm(1, "z", 1).value;
    assert_ne!(rid, bulk_request_id(&[&a, &b_again, &c]), "a member's next attempt: another request");
    assert!(uuid::Uuid::parse_str(&rid).is_ok_and(|u| !u.is_nil()), "Compute takes a non-zero UUID: {rid}");
    assert!(
        rid.len() <= 63 && rid.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
        "it is also a label value: {rid}"
    );
}

#[test]
fn bulks_are_formed_per_zone_and_attributes_at_most_max_each_in_index_order() {
    let mut waiting: Vec<Versioned<Vm>> = (0..5).rev().map(|i| vm(i, "a", 0)).collect();
    waiting.push(vm(7, "b", 0));
    let mut other = vm(8, "a", 0);
    other.value.attributes.machine_type = "e2-large".into();
    waiting.push(other);
    let got: Vec<Vec<u32>> =
        groups(waiting, 2).iter().map(|g| g.iter().map(|c| c.value.index).collect()).collect();
    assert_eq!(got.len(), 5, "{got:?}");
    for want in [vec![0, 1], vec![2, 3], vec![4], vec![7], vec![8]] {
        assert!(got.contains(&want), "{want:?} in {got:?}");
    }
}
