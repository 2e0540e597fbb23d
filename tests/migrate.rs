//! `recover migrate`: a populated store of key layout 1 moves to layout 2 (each Config's keys
//! under its own hash tag) with every record, version, index, sum, observation, list and the
//! pause read back the same; a dry run writes nothing; a second run changes nothing; and a
//! process that still believes in layout 1 cannot write to it once the move began.

use std::sync::Arc;
use std::time::Duration;

use gce_backend::adapters::redis_store::RedisStore;
use gce_backend_jobs::Ctx;
use gce_backend_jobs::model::{
    AuditAction, AuditEntry, Bot, ErrorEntry, GLOBAL_AUDIT, Observed, Pause, Sample, Series,
};
use gce_backend_jobs::ports::store::{Expect, Scope, Store, StoreError, VmIndex};
use gce_backend_jobs::testing::created;
use gce_backend_queues::testing::RedisServer;
use serde_json::{Value, json};

const PREFIXES: [&str; 2] = ["linux", "mac"];
const IDS: [&str; 5] = ["linux-0", "linux-1", "linux-2", "mac-0", "mac-1"];

/// Configs, VMs in several states and zones, bot observations (one of no VM's name), errors,
/// audit entries, counters, samples and a global pause, written through the store.
async fn populate(store: Arc<dyn Store>) {
    let (ctx, _) = Ctx::test();
    let ctx = ctx.with_store(store.clone());
    ctx.seed_config("linux", 3).await;
    ctx.seed_config("mac", 2).await;
    let now = ctx.now();
    ctx.seed_vm("linux-0", created(now)).await;
    ctx.seed_vm("linux-1", |_| {}).await;
    ctx.seed_vm("linux-2", |v| {
        created(now)(v);
        v.connected = Some(now);
        v.attributes.zone = "us-east1-b".into();
    })
    .await;
    ctx.seed_vm("mac-0", created(now)).await;
    ctx.seed_vm("mac-1", |v| v.drained = true).await;
    let bot = |id: &str| Observed {
        unknown: Default::default(),
        bot: Bot { id: id.into(), ..Default::default() },
        at: now,
        idle_since: None,
    };
    store.put_bots(&[bot("linux-0-abcd"), bot("mac-0-abcd"), bot("someone-else")]).await.unwrap();
    let e = ErrorEntry {
        unknown: Default::default(),
        time: now,
        stage: "create".into(),
        code: "QUOTA".into(),
        message: "m".into(),
        zone: "z".into(),
        operation: String::new(),
        resolved: None,
        vm: None,
    };
    store.push_error("linux", &e).await.unwrap();
    let linux = store.config("linux").await.unwrap().unwrap().value;
    store.push_audit(&AuditEntry::on(&linux, now, "ops", AuditAction::Amount), 10).await.unwrap();
    store.push_audit(&AuditEntry::global(now, "ops", AuditAction::PauseAll), 10).await.unwrap();
    store.bump("mac", "dead_tasks").await.unwrap();
    let s = Sample::of(now, &[("vms", 3)]);
    store.put_sample(&Series::Config("linux".into()), &s).await.unwrap();
    store.put_sample(&Series::Queue("create_instance".into()), &s).await.unwrap();
    let p = Pause { unknown: Default::default(), by: "ops".into(), reason: "window".into(), at: now };
    store.set_global_pause(Some(&p)).await.unwrap();
    for prefix in PREFIXES {
        gce_backend_jobs::records::counts::sums(&*store, prefix).await.unwrap();
    }
}

/// Everything the service reads, through the store.
async fn snapshot(store: &dyn Store) -> Value {
    let far = chrono::DateTime::<chrono::Utc>::MAX_UTC;
    let mut vms = Vec::new();
    for id in IDS {
        let v = store.vm(id).await.unwrap().unwrap();
        vms.push(json!([v.version, v.value]));
    }
    let mut per = serde_json::Map::new();
    for p in PREFIXES {
        per.insert(
            p.into(),
            json!({
                "ids": store.vm_ids(VmIndex::OfConfig(p.into())).await.unwrap(),
                "uncreated": store.vm_ids(VmIndex::UncreatedOf(p.into())).await.unwrap(),
                "sums": store.zone_sums(p).await.unwrap(),
                "errors": store.errors(p).await.unwrap(),
                "audit": store.audit(p, 0, 10).await.unwrap(),
                "dead_tasks": store.counter(p, "dead_tasks").await.unwrap(),
                "samples": store.samples(&Series::Config(p.into())).await.unwrap(),
            }),
        );
    }
    let hosts: Vec<String> =
        IDS.iter().map(|id| format!("{id}-abcd")).chain(["someone-else".into()]).collect();
    let mut observed = store.observed().await.unwrap();
    observed.sort();
    let mut due = store.vm_ids(VmIndex::DueBy(far)).await.unwrap();
    due.sort();
    let mut listed = store.vm_configs().await.unwrap();
    listed.sort(); // (in no order)
    json!({
        "vms": vms,
        "configs": per,
        "uncreated": store.vm_ids(VmIndex::Uncreated).await.unwrap(),
        "created": store.vm_ids(VmIndex::Created).await.unwrap(),
        "due": due,
        "by_host": store.vms_by_hostname(&hosts).await.unwrap(),
        "vm_configs": listed,
        "bots": store.bots(&hosts).await.unwrap(),
        "observed": observed,
        "global_audit": store.audit(GLOBAL_AUDIT, 0, 10).await.unwrap(),
        "queue_samples": store.samples(&Series::Queue("create_instance".into())).await.unwrap(),
        "pause": store.global_pause().await.unwrap(),
    })
}

fn keys(url: &str, pattern: &str) -> Vec<String> {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let mut k: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut conn).unwrap();
    k.sort();
    k
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_populated_store_moves_to_layout_2_with_nothing_lost() {
    let server = RedisServer::start();
    let url = server.url();
    let old = Arc::new(RedisStore::connect(&url, "test").await.unwrap());
    populate(old.clone()).await;
    let before = snapshot(&*old).await;
    assert_eq!(before["created"], json!(["linux-0", "linux-2", "mac-0"]), "{before}");

    let all = keys(&url, "*");
    let dry = old.migrate(false, Duration::ZERO).await.unwrap();
    assert_eq!((dry.from.as_str(), dry.to.as_str(), dry.applied), ("1", "1", false));
    assert_eq!((dry.configs, dry.vms, dry.bots), (2, 5, 2), "{dry:?}");
    assert_eq!(keys(&url, "*"), all, "a dry run writes nothing");

    let moved = old.migrate(true, Duration::ZERO).await.unwrap();
    assert_eq!((moved.from.as_str(), moved.to.as_str(), moved.vms, moved.unplaced), ("1", "2", 5, 0));
    assert!(moved.lists >= 4, "errors, audit, counters, samples: {moved:?}");
    let store = RedisStore::connect(&url, "test").await.unwrap();
    assert_eq!(snapshot(&store).await, before, "everything reads the same");
    // Layout 1's VM keys and a Config's lists are gone; each Config has its own tag.
    let left = keys(&url, "{test:db}:*");
    for gone in [
        "{test:db}:vm",
        "{test:db}:vm:ver",
        "{test:db}:vm:host",
        "{test:db}:sums:linux",
        "{test:db}:err:linux",
    ] {
        assert!(!left.contains(&gone.to_owned()), "{gone} left: {left:?}");
    }
    assert!(keys(&url, "{test:c:linux}:*").contains(&"{test:c:linux}:vm".to_owned()));
    assert_eq!(keys(&url, "{test:db}:bots").len(), 1, "the observation of no VM's name stays shared");
    // A build that knows only layout 1 reads its pause key as a pause it cannot decode.
    let mut conn = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    let raw: String = redis::cmd("GET").arg("{test:db}:pause").query(&mut conn).unwrap();
    assert!(serde_json::from_str::<Pause>(&raw).is_err(), "{raw}");

    // Indexes and sums are sound, and stay so through writes.
    for p in PREFIXES {
        assert!(store.derived_sound(p).await.unwrap(), "{p}");
    }
    assert!(!store.rebuild(&Scope::All).await.unwrap().changed());
    let v = store.vm("linux-1").await.unwrap().unwrap();
    let mut vm = v.value.clone();
    created(chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap())(&mut vm);
    assert!(store.put_vm(&vm, Expect::Version(v.version)).await.unwrap());
    assert_eq!(store.vm_ids(VmIndex::UncreatedOf("linux".into())).await.unwrap(), Vec::<String>::new());
    let sums = store.sums("linux").await.unwrap().unwrap();
    assert_eq!(sums[1], 3, "all three of linux's VMs have an instance: {sums:?}");
    assert!(store.delete_vm("mac-1", store.vm_version("mac-1").await.unwrap().unwrap()).await.unwrap());
    assert_eq!(store.sums("mac").await.unwrap().unwrap()[0], 1);
    assert!(!store.rebuild(&Scope::All).await.unwrap().changed(), "the writes kept them sound");

    // Run again: nothing to move, nothing changed.
    let snap = snapshot_after_writes(&store).await;
    let again = store.migrate(true, Duration::ZERO).await.unwrap();
    assert_eq!((again.from.as_str(), again.to.as_str(), again.vms), ("2", "2", 0), "{again:?}");
    assert_eq!(snapshot_after_writes(&store).await, snap);
}

/// What the first test's writes leave (mac-1 is gone).
async fn snapshot_after_writes(store: &dyn Store) -> Value {
    let mut out = Vec::new();
    for id in IDS.iter().filter(|id| **id != "mac-1") {
        out.push(serde_json::to_value(store.vm(id).await.unwrap().map(|v| (v.version, v.value))).unwrap());
    }
    for p in PREFIXES {
        out.push(serde_json::to_value(store.zone_sums(p).await.unwrap()).unwrap());
    }
    Value::Array(out)
}

/// A process read layout 1 a moment before the move began: its next VM write is refused (and it
/// reads the layout again), never written to layout 1's keys; the one after lands in layout 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_racing_the_move_waits_and_lands_in_the_new_layout() {
    let server = RedisServer::start();
    let url = server.url();
    let stale = Arc::new(RedisStore::connect(&url, "test").await.unwrap());
    let (ctx, _) = Ctx::test();
    let ctx = ctx.with_store(stale.clone());
    let vm = ctx.seed_vm("linux-0", |_| {}).await; // (reads the layout: 1, kept for a while)
    let mover = RedisStore::connect(&url, "test").await.unwrap();
    mover.migrate(true, Duration::ZERO).await.unwrap();

    let refused = stale.put_vm(&vm, Expect::Version(1)).await;
    assert!(matches!(refused, Err(StoreError::Unavailable(ref m)) if m.contains("layout")), "{refused:?}");
    assert!(keys(&url, "{test:db}:vm").is_empty(), "nothing written to layout 1");
    assert!(stale.put_vm(&vm, Expect::Version(1)).await.unwrap(), "written once it read the layout again");
    assert_eq!(mover.vm("linux-0").await.unwrap().unwrap().version, 2);
    assert_eq!(mover.vm_ids(VmIndex::Uncreated).await.unwrap(), ["linux-0"]);
}
