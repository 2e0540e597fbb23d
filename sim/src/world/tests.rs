//! Unit tests of the world: capacity and caps.

use super::*;

fn body(name: &str) -> Value {
    json!({"name": name, "machineType": "zones/us-central1-b/machineTypes/e2-small",
           "metadata": {"items": [{"key": "swarming-server", "value": "https://s.example.com"}]},
           "networkInterfaces": [{"accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}]})
}

fn world(cfg: SimConfig) -> (World, Instant) {
    let t0 = Instant::now();
    (World::new(cfg, t0), t0)
}

#[test]
fn holds_200000_instances_and_their_bots() {
    const N: usize = 200_000;
    let (mut w, t0) = world(SimConfig { max_operations: 10_000, ..SimConfig::default() });
    for n in 0..N {
        w.insert("p", "us-central1-b", None, &body(&format!("vm-{n}"))).unwrap();
    }
    w.advance(t0 + Duration::from_secs(60));
    assert_eq!(w.instances.len(), N);
    assert!(w.instances.values().all(|i| i.status == Status::Running));
    assert_eq!(w.bots["s.example.com"].len(), N, "every bot connected");
    assert!(w.operations.len() <= 10_000, "operations are capped");
    assert!(w.timeline.is_empty(), "nothing left scheduled");
    assert_eq!(w.usage[&("p".to_owned(), "us-central1".to_owned())].instances, N as u64);
}

#[test]
fn every_store_is_capped() {
    let cfg = SimConfig { max_operations: 100, max_bots: 50, max_instances: 120, ..SimConfig::default() };
    let (mut w, t0) = world(cfg);
    for n in 0..150 {
        let rid = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, format!("{n}").as_bytes()).to_string();
        w.insert("p", "us-central1-b", Some(rid), &body(&format!("vm-{n}"))).unwrap();
    }
    assert!(w.operations.len() <= 100 && w.request_ids.len() <= 100 && w.inserts.len() <= 100);
    assert_eq!(w.instances.len(), 120, "inserts past max_instances fail as a stockout");
    w.advance(t0 + Duration::from_secs(10));
    let failed = w
        .operations
        .values()
        .filter(|op| op.error.as_ref().is_some_and(|e| e.code == "ZONE_RESOURCE_POOL_EXHAUSTED"));
    assert_eq!(failed.count(), 30);
    // Dead bots are dropped first when there are too many.
    let names: Vec<String> = w.instances.keys().map(|k| k.2.clone()).take(70).collect();
    for name in &names {
        w.kill_bot("s.example.com", name);
    }
    let last: Vec<String> = w.instances.keys().map(|k| k.2.clone()).skip(100).collect();
    for name in &last {
        w.delete("p", "us-central1-b", name, None).unwrap();
    }
    w.advance(t0 + Duration::from_secs(15));
    for n in 150..160 {
        w.insert("p", "us-central1-a", None, &body(&format!("vm-{n}"))).unwrap();
    }
    w.advance(t0 + Duration::from_secs(25));
    let bots = &w.bots["s.example.com"];
    assert!(bots.values().all(|b| b.dead_at.is_none()), "past the cap, dead bots are dropped");
    assert_eq!(bots.len(), 120 - 70 - 20 + 10, "live bots stay: their instances are capped instead");
    // A bot keeps at most KEEP_BOT_EVENTS events.
    let (mut w, t0) = world(SimConfig::default());
    w.insert("p", "us-central1-b", None, &body("vm-x")).unwrap();
    let mut t = t0;
    for _ in 0..30 {
        t += Duration::from_secs(5);
        w.advance(t);
        w.terminate_bot("s.example.com", "vm-x");
        w.delete_bot("s.example.com", "vm-x");
        let id = w.instances.values().next().unwrap().id;
        w.connect_bot("s.example.com".into(), ("p".into(), "us-central1-b".into(), "vm-x".into()), id);
    }
    assert!(w.bots["s.example.com"]["vm-x"].events.len() <= KEEP_BOT_EVENTS);
}
