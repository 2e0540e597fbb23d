//! Unit tests of `quota.rs`.

use super::*;

#[test]
fn methods_fall_in_their_groups() {
    assert_eq!(Group::of("compute.instances.insert"), Some(Group::Mutations));
    assert_eq!(Group::of("compute.instances.bulkInsert"), Some(Group::Mutations));
    assert_eq!(Group::of("compute.regionInstances.bulkInsert"), Some(Group::Mutations));
    assert_eq!(Group::of("compute.instances.suspend"), Some(Group::Mutations));
    assert_eq!(Group::of("compute.instances.get"), Some(Group::Reads));
    assert_eq!(Group::of("compute.instances.list"), Some(Group::Lists));
    assert_eq!(Group::of("compute.regions.list"), Some(Group::Lists));
    assert_eq!(Group::of("compute.zoneOperations.get"), Some(Group::Operations));
    assert_eq!(Group::of("compute.zoneOperations.wait"), Some(Group::Operations));
    assert_eq!(Group::of("compute.regionOperations.get"), Some(Group::Operations));
    assert_eq!(Group::of("swarming.GetBot"), None);
    assert!(is_bulk("compute.regionInstances.bulkInsert") && !is_bulk("compute.instances.insert"));
}

#[test]
fn the_flag_takes_none_gce_default_or_a_file() {
    assert_eq!(RateQuota::parse("none").unwrap().limits("p"), None);
    assert_eq!(RateQuota::parse("gce-default").unwrap().limits("p"), Some(&Limits::GCE_DEFAULT));
    let dir = std::env::temp_dir().join(format!("sim-quota-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("quota.json");
    std::fs::write(&file, r#"{"default": {"mutations": 10}, "projects": {"big": {"reads": 0}}}"#).unwrap();
    let q = RateQuota::parse(file.to_str().unwrap()).unwrap();
    let other = q.limits("other").unwrap();
    assert_eq!(
        (other.mutations, other.reads, other.bulk_running),
        (10, 1500, 10),
        "the rest are gce-default's"
    );
    let big = q.limits("big").unwrap();
    assert_eq!((big.mutations, big.reads), (10, 0), "a project's rest are the default's");
    std::fs::write(&file, r#"{"default": {"mutation": 10}}"#).unwrap();
    let e = RateQuota::parse(file.to_str().unwrap()).unwrap_err();
    assert!(e.contains("quota.json") && e.contains("unknown field `mutation`"), "{e}");
    std::fs::write(&file, r#"{"projects": {"Bad_Name": {}}}"#).unwrap();
    assert!(RateQuota::parse(file.to_str().unwrap()).unwrap_err().contains("projects.Bad_Name"));
    let e = RateQuota::parse(dir.join("missing.json").to_str().unwrap()).unwrap_err();
    assert!(e.contains("missing.json"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
