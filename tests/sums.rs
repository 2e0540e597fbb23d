//! Counts are O(1): the stores keep each Config's sums in step with every VM write and delete,
//! exact against a count of the records, on memory and Redis; VMs written before sums were kept
//! are counted in once.

use std::collections::BTreeMap;
use std::sync::Arc;

use gce_backend::adapters::redis_store::RedisStore;
use gce_backend_jobs::model::{Counts, Fault, FaultKind, Sums};
use gce_backend_jobs::ports::store::{Expect, Store, VmIndex};
use gce_backend_jobs::records::counts::tally;
use gce_backend_jobs::store::memory::MemoryStore;
use gce_backend_jobs::testing::created;
use gce_backend_jobs::{Ctx, records::writes::write_vm};
use gce_backend_queues::testing::RedisServer;

/// The counts by reading every VM record (what the sums must equal).
async fn by_records(
    store: &dyn Store,
    prefix: &str,
    configured: u32,
    now: chrono::DateTime<chrono::Utc>,
) -> Counts {
    let mut c = Counts { configured, at: Some(now), ..Counts::default() };
    for id in store.vm_ids(VmIndex::OfConfig(prefix.into())).await.unwrap() {
        let vm = store.vm(&id).await.unwrap().unwrap().value;
        let down = vm.fault.as_ref().is_some_and(|f| f.kind == FaultKind::InstanceDown);
        c.vms += 1;
        c.created += u32::from(vm.instance.is_some());
        c.running += u32::from(vm.instance.is_some() && !down);
        c.connected += u32::from(vm.connected.is_some() && vm.instance.is_some() && vm.fault.is_none());
        c.draining += u32::from(vm.drained);
        c.dead += u32::from(vm.fault.as_ref().is_some_and(|f| f.kind == FaultKind::BotDead));
        c.unhealthy += u32::from(
            vm.fault
                .as_ref()
                .is_some_and(|f| matches!(f.kind, FaultKind::InstanceDown | FaultKind::NeverConnected)),
        );
    }
    c
}

/// The per-zone sums by reading every VM record (what the zone sums must equal; zones left at
/// zero dropped).
async fn zones_by_records(store: &dyn Store, prefix: &str) -> BTreeMap<String, Sums> {
    let mut out: BTreeMap<String, Sums> = BTreeMap::new();
    for id in store.vm_ids(VmIndex::OfConfig(prefix.into())).await.unwrap() {
        let vm = store.vm(&id).await.unwrap().unwrap().value;
        let sums = out.entry(vm.zone().to_owned()).or_default();
        for (i, s) in sums.iter_mut().enumerate() {
            *s += i64::from(vm.counted() >> i & 1);
        }
    }
    out
}

/// A store's zone sums, zones left at zero dropped.
async fn zone_sums(store: &dyn Store, prefix: &str) -> BTreeMap<String, Sums> {
    let mut z = store.zone_sums(prefix).await.unwrap().map(|(_, z)| z).unwrap_or_default();
    z.retain(|_, s| s.iter().any(|n| *n != 0));
    z
}

async fn sums_follow_every_write(store: Arc<dyn Store>) {
    let ctx = Ctx::test().0.with_store(store.clone());
    let now = ctx.now();
    ctx.seed_config("linux", 6).await;
    let check = |what: &'static str| {
        let ctx = ctx.clone();
        async move {
            let (counts, left) = tally(&*ctx.ports.store, "linux", now).await.unwrap();
            assert!(left);
            assert_eq!(counts, by_records(&*ctx.ports.store, "linux", 6, now).await, "{what}");
            let zones = zones_by_records(&*ctx.ports.store, "linux").await;
            assert_eq!(zone_sums(&*ctx.ports.store, "linux").await, zones, "{what}: per zone");
            (counts, zones)
        }
    };
    ctx.seed_vm("linux-0", created(now)).await;
    ctx.seed_vm("linux-1", |v| v.attributes.zone = "b".into()).await;
    ctx.seed_vm("linux-2", |v| {
        created(now)(v);
        v.connected = Some(now);
    })
    .await;
    let (c, zones) = check("seeded").await;
    assert_eq!((c.created, c.running, c.connected), (2, 2, 1));
    assert_eq!((zones["z"][0], zones["z"][3], zones["b"][0]), (2, 1, 1), "{zones:?}");
    // Every kind of change, each one a compare-and-set write.
    write_vm(&ctx, "linux-1", |v| {
        created(now)(v);
        v.attributes.zone = "c".into(); // a record that changes zone moves its part
        true
    })
    .await
    .unwrap();
    write_vm(&ctx, "linux-0", |v| {
        v.drained = true;
        v.fault = Some(Fault {
            unknown: Default::default(),
            kind: FaultKind::InstanceDown,
            detail: "x".into(),
            at: now,
        });
        true
    })
    .await
    .unwrap();
    write_vm(&ctx, "linux-2", |v| {
        v.fault = Some(Fault {
            unknown: Default::default(),
            kind: FaultKind::BotDead,
            detail: "x".into(),
            at: now,
        });
        true
    })
    .await
    .unwrap();
    let (c, zones) = check("changed").await;
    assert_eq!((c.created, c.running, c.connected, c.draining, c.dead, c.unhealthy), (3, 2, 0, 1, 1, 1));
    assert_eq!(zones.keys().collect::<Vec<_>>(), ["c", "z"]);
    // A write that loses its compare-and-set changes nothing.
    let stale = ctx.ports.store.vm("linux-1").await.unwrap().unwrap();
    let mut gone = stale.value.clone();
    gone.instance = None;
    assert!(!ctx.ports.store.put_vm(&gone, Expect::Version(stale.version + 5)).await.unwrap());
    check("a lost compare-and-set").await;
    // Deletes take their part away; a Config with nothing left says so.
    for id in ["linux-0", "linux-1", "linux-2"] {
        let v = ctx.ports.store.vm_version(id).await.unwrap().unwrap();
        assert!(ctx.ports.store.delete_vm(id, v).await.unwrap());
    }
    let (c, _) = check("deleted").await;
    assert_eq!((c.created, c.running, c.draining, c.dead, c.unhealthy), (0, 0, 0, 0, 0));
    assert_eq!(ctx.ports.store.sums("linux").await.unwrap().unwrap(), [0; gce_backend_jobs::model::SUMS]);
    assert!(zone_sums(&*ctx.ports.store, "linux").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sums_follow_every_write_in_memory() {
    sums_follow_every_write(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sums_follow_every_write_in_redis() {
    let server = RedisServer::start();
    sums_follow_every_write(Arc::new(RedisStore::connect(&server.url(), "test").await.unwrap())).await;
}

/// VMs written before sums were kept (their `vm:counted`, `vm:zoned` entries and the sums removed,
/// as an older build left them) are counted in by the first tally, once; zone sums left behind by
/// a build that keeps none are counted again from the records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vms_written_before_sums_are_counted_in_once() {
    let server = RedisServer::start();
    let store = Arc::new(RedisStore::connect(&server.url(), "test").await.unwrap());
    let ctx = Ctx::test().0.with_store(store.clone());
    let now = ctx.now();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", created(now)).await;
    ctx.seed_vm("linux-1", |_| {}).await;
    let client = redis::Client::open(server.url().as_str()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let _: () = redis::cmd("DEL")
        .arg("{test:db}:vm:counted")
        .arg("{test:db}:vm:zoned")
        .arg("{test:db}:sums:linux")
        .arg("{test:db}:vm:idx") // (nor what each VM's indexes said, which came later)
        .query(&mut conn)
        .unwrap();
    assert_eq!(store.sums("linux").await.unwrap(), None, "not known to cover every VM");
    // A write before the first tally counts itself in; the tally then counts in the rest.
    write_vm(&ctx, "linux-1", |v| {
        created(now)(v);
        true
    })
    .await
    .unwrap();
    for _ in 0..2 {
        let (counts, _) = tally(&*ctx.ports.store, "linux", now).await.unwrap();
        assert_eq!(counts, by_records(&*ctx.ports.store, "linux", 3, now).await);
        assert_eq!((counts.created, counts.running), (2, 2));
    }
    assert_eq!(store.sums("linux").await.unwrap().unwrap()[0], 2, "two VMs, each once");
    assert_eq!(zone_sums(&*store, "linux").await, zones_by_records(&*store, "linux").await);
    // VMs written by a build that keeps no zone sums (none for them; then one write of linux-1,
    // connected, as that build writes: its bits and the totals only): the zone sums disagree with
    // the totals, and the next read counts them again, once, from the records and their bits.
    let mut cmd = |args: &[&str]| {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        let _: redis::Value = c.query(&mut conn).unwrap();
    };
    cmd(&["DEL", "{test:db}:vm:zoned"]);
    for i in 0..7 {
        cmd(&["HDEL", "{test:db}:sums:linux", &format!("z/{i}")]);
    }
    let bits = store.vm("linux-1").await.unwrap().unwrap().value.counted() | 1 << 3;
    cmd(&["HSET", "{test:db}:vm:counted", "linux-1", &bits.to_string()]);
    cmd(&["HINCRBY", "{test:db}:sums:linux", "3", "1"]);
    assert!(zone_sums(&*store, "linux").await.is_empty(), "the older build left no zone sums");
    let z = gce_backend_jobs::records::counts::zone_sums(&*store, "linux").await.unwrap();
    assert_eq!(z.keys().collect::<Vec<_>>(), ["z"]);
    assert_eq!((z["z"][0], z["z"][1], z["z"][3]), (2, 2, 1), "two VMs, both created, one connected: {z:?}");
    assert_eq!(zone_sums(&*store, "linux").await, z, "kept: the next read needs no recount");
    // From then on they follow every write again.
    write_vm(&ctx, "linux-0", |v| {
        v.connected = Some(now);
        true
    })
    .await
    .unwrap();
    assert_eq!(zone_sums(&*store, "linux").await["z"][3], 2);
    assert_eq!(store.sums("linux").await.unwrap().unwrap()[3], 2);
}

/// A tally costs the same Redis commands at 10 and at 1 000 VMs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tally_costs_the_same_at_10_and_1000_vms() {
    let server = RedisServer::start();
    let store = Arc::new(RedisStore::connect(&server.url(), "test").await.unwrap());
    let ctx = Ctx::test().0.with_store(store.clone());
    let now = ctx.now();
    for (prefix, n) in [("small", 10), ("big", 1000)] {
        ctx.seed_config(prefix, n).await;
        for i in 0..n {
            ctx.seed_vm(&format!("{prefix}-{i}"), created(now)).await;
        }
        tally(&*ctx.ports.store, prefix, now).await.unwrap();
    }
    let client = redis::Client::open(server.url().as_str()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let mut processed = || -> u64 {
        let info: String = redis::cmd("INFO").arg("stats").query(&mut conn).unwrap();
        let line = info.lines().find(|l| l.starts_with("total_commands_processed:")).unwrap();
        line.split(':').nth(1).unwrap().trim().parse().unwrap()
    };
    let mut cost = Vec::new();
    for (prefix, n) in [("small", 10u32), ("big", 1000)] {
        let before = processed();
        let (counts, _) = tally(&*ctx.ports.store, prefix, now).await.unwrap();
        cost.push(processed() - before - 1); // less the INFO itself
        assert_eq!(counts.created, n);
    }
    assert_eq!(cost[0], cost[1], "commands per tally at 10 and 1 000 VMs: {cost:?}");
}
