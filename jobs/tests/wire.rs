//! Golden wire tests: every payload's JSON is pinned, because queued payloads outlive deploys.
//! A change here is a wire migration: old tasks in Redis must still decode.

use gce_backend_jobs::tasks::*;
use gce_backend_queues::Task;
use serde_json::Value;

fn golden<T: Task + PartialEq>(sample: T) {
    let path = format!("{}/tests/golden/{}.json", env!("CARGO_MANIFEST_DIR"), T::QUEUE);
    let pinned: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect(&path)).expect(&path);
    assert_eq!(serde_json::to_value(&sample).unwrap(), pinned, "{} changed on the wire", T::QUEUE);
    assert_eq!(serde_json::from_value::<T>(pinned).unwrap(), sample, "{} no longer decodes", T::QUEUE);
}

#[test]
fn every_payload_matches_its_golden_json() {
    let id = || "linux-3".to_owned();
    golden(ExpandConfig { prefix: "linux".into() });
    golden(CreateVm { id: id() });
    golden(CreateInstance { id: id() });
    golden(ManageBot { id: id() });
    golden(InspectSwarming { server: "https://swarm.example.com".into() });
    golden(InspectInstances { project: "p".into(), zone: "us-central1-b".into() });
    golden(TerminateBot { id: id(), hostname: "linux-3-ab12".into() });
    golden(DestroyInstance {
        id: id(),
        url: "https://www.googleapis.com/compute/v1/projects/p/zones/z/instances/linux-3-ab12".into(),
    });
    golden(DeleteBot { id: id(), hostname: "linux-3-ab12".into() });
    golden(DrainVm { id: id() });
    golden(AuditInstances { project: "p".into(), zone: "us-central1-b".into() });
    golden(DeleteStaleBots { server: "https://swarm.example.com".into() });
    golden(CountVms { prefix: "linux".into() });
    golden(ReportQuota { project: "p".into() });
    golden(ReadDemand { server: "https://swarm.example.com".into() });
    golden(ParkVm { id: id() });
    golden(BulkInsert { prefix: "linux".into() });
    golden(PoolResources { prefix: "linux".into() });
    golden(AuditTemplates { project: "p".into() });
    assert_eq!(QUEUES.len(), 19);
}

/// Which queues are partitioned, into how many, and where a key goes: part of the queues' Redis
/// key layout (a task in a partition a build does not know is not taken by it).
#[test]
fn partitions_are_part_of_the_layout() {
    use gce_backend_jobs::work::{PARTITIONED, partitions};
    assert_eq!(PARTITIONED, [("manage_bot", 16)]);
    assert_eq!((partitions("manage_bot"), partitions("create_instance")), (16, 1));
}

#[test]
fn keys_name_the_entity_and_guard_the_incarnation() {
    assert_eq!(CreateInstance { id: "linux-3".into() }.key(), "linux-3");
    let a = TerminateBot { id: "linux-3".into(), hostname: "linux-3-ab12".into() };
    let b = TerminateBot { id: "linux-3".into(), hostname: "linux-3-cd34".into() };
    assert_ne!(a.key(), b.key(), "a task for a new incarnation is not deduped against the old one");
    // A newer build's payload, with a field this one does not know, is read, not dead-lettered.
    let newer = serde_json::from_str::<CreateVm>(r#"{"id":"x","extra":{"n":1}}"#).unwrap();
    assert_eq!(newer, CreateVm { id: "x".into() });
}
