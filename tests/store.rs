//! The Store contract, checked against the in-memory store and the Redis store (each Redis run
//! on its own `redis-server`).

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use gce_backend::adapters::redis_store::RedisStore;
use gce_backend_jobs::model::{Backoff, ConfigRecord, ErrorEntry, KEEP_ERRORS, Observed, Pause, Placed};
use gce_backend_jobs::ports::store::{Expect, Fence, Store, VmIndex};
use gce_backend_jobs::store::memory::MemoryStore;
use gce_backend_jobs::testing::config;
use gce_backend_jobs::{Ctx, model::Bot};
use gce_backend_queues::testing::RedisServer;

async fn contract(store: Arc<dyn Store>) {
    // Records with compare-and-set.
    let rec = ConfigRecord {
        config: config("linux", 2),
        revision: "a".into(),
        current_amount: 2,
        source: "pools/linux.yaml".into(),
        verified: true,
        ..Default::default()
    };
    assert!(store.put_config(&rec, Expect::Absent).await.unwrap());
    assert!(!store.put_config(&rec, Expect::Absent).await.unwrap(), "already there");
    let v1 = store.config("linux").await.unwrap().unwrap();
    assert_eq!((v1.version, v1.value.current_amount), (1, 2));
    assert!(!store.put_config(&rec, Expect::Version(7)).await.unwrap(), "stale version");
    assert!(
        store
            .put_config(&ConfigRecord { current_amount: 5, ..rec.clone() }, Expect::Version(1))
            .await
            .unwrap()
    );
    assert_eq!(store.configs().await.unwrap()[0].version, 2);
    // A pause is part of the record.
    let t = Utc.with_ymd_and_hms(2026, 11, 21, 10, 0, 0).unwrap();
    let pause = Pause { unknown: Default::default(), by: "alice".into(), reason: "rollout".into(), at: t };
    let paused = ConfigRecord { paused: Some(pause.clone()), ..rec.clone() };
    assert!(store.put_config(&paused, Expect::Version(2)).await.unwrap());
    assert_eq!(store.config("linux").await.unwrap().unwrap().value, paused);
    assert!(store.put_config(&rec, Expect::Version(3)).await.unwrap());
    assert_eq!(store.config("linux").await.unwrap().unwrap().value.paused, None);
    // The global pause: set, read, lifted.
    assert_eq!(store.global_pause().await.unwrap(), None);
    store.set_global_pause(Some(&pause)).await.unwrap();
    assert_eq!(store.global_pause().await.unwrap(), Some(pause));
    store.set_global_pause(None).await.unwrap();
    assert_eq!(store.global_pause().await.unwrap(), None);
    store.set_global_pause(None).await.unwrap();
    assert!(!store.delete_config("linux", 1).await.unwrap());
    assert!(store.delete_config("linux", 4).await.unwrap());
    assert!(store.config("linux").await.unwrap().is_none());

    // VMs and their indexes.
    let (ctx, _) = Ctx::test();
    let ctx = ctx.with_store(store.clone());
    let vm = ctx.seed_vm("linux-0", |_| {}).await;
    ctx.seed_vm("linux-1", |_| {}).await;
    assert_eq!(store.vm_ids(VmIndex::Uncreated).await.unwrap(), ["linux-0", "linux-1"]);
    assert!(store.vm_ids(VmIndex::Created).await.unwrap().is_empty());
    let mut made = vm.clone();
    made.instance = Some(Placed {
        unknown: Default::default(),
        url: "https://x/linux-0-abcd".into(),
        created: ctx.now(),
        instance_id: "1".into(),
        internal_ip: String::new(),
        external_ip: String::new(),
    });
    assert!(!store.put_vm(&made, Expect::Version(9)).await.unwrap());
    assert!(store.put_vm(&made, Expect::Version(1)).await.unwrap());
    assert_eq!(store.vm_ids(VmIndex::Created).await.unwrap(), ["linux-0"]);
    assert_eq!(store.vm_ids(VmIndex::Uncreated).await.unwrap(), ["linux-1"]);
    assert_eq!(store.vm_ids(VmIndex::OfConfig("linux".into())).await.unwrap(), ["linux-0", "linux-1"]);
    let hosts = store.vms_by_hostname(&["linux-0-abcd".into(), "nope".into()]).await.unwrap();
    assert_eq!(hosts, [Some("linux-0".to_owned()), None]);
    assert_eq!(store.vm_configs().await.unwrap(), ["linux"]);
    let at = crate::support::wall_now();
    let bot = Bot { id: "linux-0-abcd".into(), task_id: "t1".into(), ..Bot::default() };
    let seen = Observed {
        unknown: Default::default(),
        bot,
        at,
        idle_since: Some(at - chrono::TimeDelta::minutes(3)),
    };
    store.put_bots(std::slice::from_ref(&seen)).await.unwrap();
    assert_eq!(store.bot("linux-0-abcd").await.unwrap(), Some(seen), "kept whole: its task and idle time");
    assert!(!store.delete_vm("linux-0", 1).await.unwrap(), "stale version");
    assert!(store.delete_vm("linux-0", 2).await.unwrap());
    assert!(store.delete_vm("linux-1", 1).await.unwrap());
    assert!(store.vm_ids(VmIndex::Created).await.unwrap().is_empty());
    assert!(store.vm_configs().await.unwrap().is_empty(), "no VM left for linux");
    assert!(store.bot("linux-0-abcd").await.unwrap().is_none(), "the observation goes with the VM");
    assert_eq!(store.vms_by_hostname(&["linux-0-abcd".into()]).await.unwrap(), [None]);

    // Status: errors capped, counts, backoff.
    for n in 0..25 {
        let e = ErrorEntry {
            unknown: Default::default(),
            time: t,
            stage: "s".into(),
            code: n.to_string(),
            message: "m".into(),
            zone: "z".into(),
            operation: String::new(),
            resolved: None,
            vm: (n == 24).then(|| "linux-3".into()),
        };
        let stage = if n % 2 == 0 { "even" } else { "odd" };
        store.push_error("linux", &ErrorEntry { stage: stage.into(), ..e }).await.unwrap();
    }
    let errors = store.errors("linux").await.unwrap();
    assert_eq!(errors.len(), KEEP_ERRORS);
    assert_eq!(errors[0].code, "24", "newest first");
    // Resolving a stage marks only its unresolved errors, in place.
    let later = t + chrono::Duration::minutes(1);
    store.resolve_errors("linux", &["even"], later).await.unwrap();
    let errors = store.errors("linux").await.unwrap();
    assert_eq!(errors.len(), KEEP_ERRORS);
    assert!(errors.iter().all(|e| (e.stage == "even") == (e.resolved == Some(later))), "{errors:?}");
    store.resolve_errors("linux", &["even"], later + chrono::Duration::minutes(1)).await.unwrap();
    let errors = store.errors("linux").await.unwrap();
    assert_eq!(errors[0].resolved, Some(later), "kept from the first time");
    assert_eq!((errors[0].vm.as_deref(), errors[1].vm.as_deref()), (Some("linux-3"), None), "the VM, kept");
    // Dead tasks and file errors.
    store.bump("linux", "dead_tasks").await.unwrap();
    store.bump("linux", "dead_tasks").await.unwrap();
    store.bump("linux", "task_failures").await.unwrap();
    assert_eq!(store.counter("linux", "dead_tasks").await.unwrap(), 2);
    assert_eq!(store.counter("linux", "task_failures").await.unwrap(), 1);
    assert_eq!(store.counter("mac", "dead_tasks").await.unwrap(), 0);
    let fe = gce_backend_jobs::model::FileError {
        unknown: Default::default(),
        path: "pools/x.yaml".into(),
        prefix: String::new(),
        since: t,
        message: "is empty".into(),
        kind: Default::default(),
        owner: None,
    };
    let held = gce_backend_jobs::model::FileError {
        path: "pools/linux.yaml".into(),
        prefix: "linux".into(),
        kind: gce_backend_jobs::model::FileProblem::DeletionHeld,
        owner: Some(vec!["team-a".into()]),
        ..fe.clone()
    };
    store.set_file_errors(&[fe.clone(), held.clone()]).await.unwrap();
    assert_eq!(store.file_errors().await.unwrap(), [fe, held]);
    store.set_file_errors(&[]).await.unwrap();
    assert!(store.file_errors().await.unwrap().is_empty());
    let b = Backoff {
        unknown: Default::default(),
        project: "p".into(),
        zone: "z".into(),
        until: t,
        failures: 2,
        reason: "QUOTA_EXCEEDED".into(),
    };
    store.set_backoff("p", "z", Some(&b)).await.unwrap();
    assert_eq!(store.backoff("p", "z").await.unwrap(), Some(b.clone()));
    assert_eq!(store.backoffs(&[("p", "y"), ("p", "z")]).await.unwrap(), [None, Some(b)], "in order");
    assert!(store.backoffs(&[]).await.unwrap().is_empty(), "none asked, none read");
    store.set_backoff("p", "z", None).await.unwrap();
    assert!(store.backoff("p", "z").await.unwrap().is_none());
    let counts = gce_backend_jobs::model::Counts {
        configured: 3,
        created: 2,
        connected: 1,
        at: Some(t),
        ..Default::default()
    };
    store.put_counts("linux", &counts).await.unwrap();
    assert_eq!(store.counts("linux").await.unwrap(), Some(counts));
    // Zone sums come with the totals, and agree with them (zone "" for a VM without one).
    let zoned = gce_backend_jobs::model::Vm {
        id: "linux-9".into(),
        config: "linux".into(),
        hostname: "linux-9-zzzz".into(),
        ..Default::default()
    };
    assert!(store.put_vm(&zoned, Expect::Absent).await.unwrap());
    gce_backend_jobs::records::counts::sums(&*store, "linux").await.unwrap();
    let (totals, zones) = store.zone_sums("linux").await.unwrap().expect("complete");
    for i in 0..totals.len() {
        assert_eq!(zones.values().map(|z| z[i]).sum::<i64>(), totals[i], "sum {i}: {zones:?}");
    }
    assert!(zones[""][0] >= 1, "{zones:?}");
    let nonzero = |mut z: std::collections::BTreeMap<String, [i64; gce_backend_jobs::model::SUMS]>| {
        z.retain(|_, s| s.iter().any(|n| *n != 0));
        z
    };
    store.recount_zones("linux").await.unwrap();
    let again = store.zone_sums("linux").await.unwrap().unwrap().1;
    assert_eq!(nonzero(again), nonzero(zones), "counting again changes nothing");
    store.drop_status("linux").await.unwrap();
    assert!(store.errors("linux").await.unwrap().is_empty());
    assert!(store.counts("linux").await.unwrap().is_none());
    assert_eq!(store.counter("linux", "dead_tasks").await.unwrap(), 0);

    // Claims (cron ticks) and marks (two-phase cleanups).
    assert!(store.claim("cron:x:60", Duration::from_secs(60)).await.unwrap());
    assert!(!store.claim("cron:x:60", Duration::from_secs(60)).await.unwrap());
    assert!(store.claim("cron:x:120", Duration::from_secs(60)).await.unwrap());
    // Leases: taken by one holder, renewed by it, refused to another, released by it only.
    assert!(store.lease("adm", "a", Duration::from_secs(60)).await.unwrap());
    assert!(store.lease("adm", "a", Duration::from_secs(60)).await.unwrap(), "renewed");
    assert!(!store.lease("adm", "b", Duration::from_secs(60)).await.unwrap());
    store.release("adm", "b").await.unwrap();
    assert!(!store.lease("adm", "b", Duration::from_secs(60)).await.unwrap(), "not b's to release");
    assert!(store.renew("adm", "a", Duration::from_secs(60)).await.unwrap());
    assert!(!store.renew("adm", "b", Duration::from_secs(60)).await.unwrap(), "not b's to renew");
    store.release("adm", "a").await.unwrap();
    assert!(
        !store.renew("adm", "a", Duration::from_secs(60)).await.unwrap(),
        "a lapsed lease is not taken back"
    );
    assert!(store.lease("adm", "b", Duration::from_secs(60)).await.unwrap(), "released early");
    assert!(!store.claim("adm", Duration::from_secs(60)).await.unwrap(), "a lease is a claim too");
    // A Config write fenced by a lease lands only while its holder holds it.
    let fenced = ConfigRecord { config: config("fenced", 1), ..Default::default() };
    let fence = |holder: &str| Fence { key: "adm".into(), holder: holder.into() };
    assert!(!store.put_config_fenced(&fenced, Expect::Absent, &fence("a")).await.unwrap(), "not a's now");
    assert!(store.config("fenced").await.unwrap().is_none());
    assert!(store.put_config_fenced(&fenced, Expect::Absent, &fence("b")).await.unwrap());
    assert_eq!(store.config("fenced").await.unwrap().unwrap().version, 1);
    assert_eq!(store.mark("leak", "p/z/a", t).await.unwrap(), t);
    assert_eq!(
        store.mark("leak", "p/z/a", t + chrono::Duration::hours(1)).await.unwrap(),
        t,
        "the first mark stays"
    );
    assert_eq!(store.marks("leak").await.unwrap(), [("p/z/a".to_owned(), t)]);
    store.unmark("leak", "p/z/a").await.unwrap();
    assert!(store.marks("leak").await.unwrap().is_empty());
    // The sums dropped above with the VMs still there (counted in again as zero, since each VM
    // is marked counted) disagree with the VM index: found by the cheap check and recounted.
    gce_backend_jobs::records::counts::sums(&*store, "linux").await.unwrap();
    assert!(store.heal_requests().await.unwrap().is_empty());
    use gce_backend_jobs::ports::store::Scope;
    if !store.derived_sound("linux").await.unwrap() {
        let r = store.rebuild(&Scope::Config("linux".into())).await.unwrap();
        assert_eq!(r.recounted, ["linux"], "{r:?}");
    }
    assert!(store.derived_sound("linux").await.unwrap());
    // Sound derived keys: a full rebuild changes nothing.
    let r = store.rebuild(&Scope::All).await.unwrap();
    assert!(!r.changed(), "{r:?}");
    series(&*store).await;
    audit(&*store).await;
    prices(&*store).await;
}

/// The price book: none, then replaced whole by each write.
async fn prices(store: &dyn Store) {
    use gce_backend_jobs::{prices::book::PriceBook, prices::book::Unreachable};
    assert!(store.price_book().await.unwrap().is_none());
    let mut book = PriceBook::snapshot().unwrap();
    store.put_price_book(&book).await.unwrap();
    let at = Utc.with_ymd_and_hms(2026, 12, 8, 4, 0, 0).unwrap();
    book.unreachable = Some(Unreachable { since: at, error: "503".into(), unknown: Default::default() });
    store.put_price_book(&book).await.unwrap();
    let got = store.price_book().await.unwrap().unwrap();
    assert_eq!((got.read_at, &got.source, &got.unreachable), (book.read_at, &book.source, &book.unreachable));
    assert_eq!(got.rates(), book.rates());
    assert_eq!(got.skus.len(), book.skus.len());
}

/// Time series: one sample per minute (a second replaces the first), the newest
/// [`KEEP_SAMPLES`] kept, oldest first; a Config's dropped with its status, a queue's kept.
async fn series(store: &dyn Store) {
    use gce_backend_jobs::model::{KEEP_SAMPLES, Sample, Series};
    let t0 = Utc.with_ymd_and_hms(2026, 11, 21, 10, 0, 30).unwrap();
    let (cfg, queue) = (Series::Config("gone".into()), Series::Queue("create_vm".into()));
    let last = KEEP_SAMPLES as i64 + 1;
    for s in [&cfg, &queue] {
        store.put_sample(s, &Sample::of(t0, &[("n", 1)])).await.unwrap();
        store.put_sample(s, &Sample::of(t0 + chrono::Duration::seconds(20), &[("n", 2)])).await.unwrap();
        for m in 1..=last {
            store
                .put_sample(s, &Sample::of(t0 + chrono::Duration::minutes(m), &[("n", 10 + m as u64)]))
                .await
                .unwrap();
        }
    }
    let got = store.samples(&cfg).await.unwrap();
    let values: Vec<u64> = got.iter().map(|s| s.get("n")).collect();
    assert_eq!(values, (12..=10 + last as u64).collect::<Vec<_>>(), "{got:?}");
    assert_eq!(got[0].at, Utc.with_ymd_and_hms(2026, 11, 21, 10, 2, 0).unwrap(), "by the minute");
    store.put_sample(&cfg, &Sample::of(t0 + chrono::Duration::minutes(last), &[("n", 7)])).await.unwrap();
    let values: Vec<u64> = store.samples(&cfg).await.unwrap().iter().map(|s| s.get("n")).collect();
    assert_eq!(values.last(), Some(&7), "the minute's sample replaced");
    assert_eq!(values[..KEEP_SAMPLES - 1], (12..10 + last as u64).collect::<Vec<_>>(), "the others kept");
    store.drop_status("gone").await.unwrap();
    assert!(store.samples(&cfg).await.unwrap().is_empty(), "dropped with the Config's status");
    assert_eq!(store.samples(&queue).await.unwrap().len(), KEEP_SAMPLES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_meets_the_contract() {
    contract(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_meets_the_contract() {
    let server = RedisServer::start();
    contract(Arc::new(RedisStore::connect(&server.url(), "test").await.unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_meets_the_contract_on_a_cluster() {
    let cluster = gce_backend_queues::testing::Cluster::start(3, 0);
    contract(Arc::new(RedisStore::connect(&cluster.url(), "test").await.unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_meets_the_contract_over_tls() {
    let server = RedisServer::start_tls();
    contract(Arc::new(RedisStore::connect(&server.url(), "test").await.unwrap())).await;
}

/// A store moved to key layout 2 (each Config's keys under its own tag); empty, so at once.
async fn in_layout_2(url: &str) -> Arc<RedisStore> {
    let store = RedisStore::connect(url, "test").await.unwrap();
    let m = store.migrate(true, Duration::ZERO).await.unwrap();
    assert_eq!((m.from.as_str(), m.to.as_str(), m.vms), ("1", "2", 0));
    Arc::new(store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_meets_the_contract_in_layout_2() {
    let server = RedisServer::start();
    contract(in_layout_2(&server.url()).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_meets_the_contract_on_a_cluster_in_layout_2() {
    let cluster = gce_backend_queues::testing::Cluster::start(3, 0);
    contract(in_layout_2(&cluster.url()).await).await;
}

/// The audit trail: per Config and global lists, newest first, bounded, paged, kept after the
/// Config's status is dropped.
async fn audit(store: &dyn Store) {
    use gce_backend_jobs::model::{AuditAction, AuditEntry, GLOBAL_AUDIT};
    let t = Utc.with_ymd_and_hms(2026, 11, 21, 10, 0, 0).unwrap();
    let rec = ConfigRecord { config: config("audited", 2), revision: "a".into(), ..Default::default() };
    for n in 0..7 {
        let e = AuditEntry::on(&rec, t, "alice", AuditAction::Amount).detail(format!("amount {n}"));
        store.push_audit(&e, 5).await.unwrap();
    }
    store.push_audit(&AuditEntry::global(t, "ops", AuditAction::PauseAll), 5).await.unwrap();
    let details = |v: Vec<AuditEntry>| v.into_iter().map(|e| e.detail).collect::<Vec<_>>();
    let all = store.audit("audited", 0, 100).await.unwrap();
    assert_eq!(all.len(), 5, "bounded: the newest 5 of 7");
    assert_eq!(all[0].owner, rec.config.owner);
    assert_eq!(details(all), ["amount 6", "amount 5", "amount 4", "amount 3", "amount 2"]);
    assert_eq!(details(store.audit("audited", 3, 10).await.unwrap()), ["amount 3", "amount 2"]);
    assert!(store.audit("audited", 5, 10).await.unwrap().is_empty());
    assert!(store.audit("audited", 0, 0).await.unwrap().is_empty());
    let global = store.audit(GLOBAL_AUDIT, 0, 10).await.unwrap();
    assert_eq!((global.len(), global[0].action, global[0].actor.as_str()), (1, AuditAction::PauseAll, "ops"));
    assert!(store.audit("mac", 0, 10).await.unwrap().is_empty());
    // A deleted Config keeps its trail.
    store.drop_status("audited").await.unwrap();
    assert_eq!(store.audit("audited", 0, 10).await.unwrap().len(), 5);
}

/// VM records written before `instance` existed kept its fields flat; they still read, the
/// instance intact, and a record without one reads as uncreated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_stored_in_the_flat_format_reads_with_its_instance() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), "test").await.unwrap();
    let ctx = Ctx::test().0.with_store(Arc::new(store));
    let mut vm = ctx.seed_vm("linux-0", |_| {}).await;
    let mut flat = serde_json::to_value(&vm).unwrap();
    flat["url"] = "https://compute/projects/p/zones/z/instances/linux-0-abcd".into();
    flat["created"] = "2026-11-01T10:00:00Z".into();
    flat["internal_ip"] = "10.0.0.7".into();
    flat["external_ip"] = "".into();
    let mut unmade = serde_json::to_value(&vm).unwrap();
    unmade["url"] = "".into();
    let client = redis::Client::open(server.url().as_str()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let _: () = redis::cmd("HSET")
        .arg("{test:db}:vm")
        .arg("linux-0")
        .arg(flat.to_string())
        .arg("linux-1")
        .arg(unmade.to_string())
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("HSET").arg("{test:db}:vm:ver").arg("linux-1").arg("1").query(&mut conn).unwrap();

    let got = ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value;
    vm.instance = Some(Placed {
        unknown: Default::default(),
        url: "https://compute/projects/p/zones/z/instances/linux-0-abcd".into(),
        created: Utc.with_ymd_and_hms(2026, 11, 1, 10, 0, 0).unwrap(),
        instance_id: String::new(),
        internal_ip: "10.0.0.7".into(),
        external_ip: String::new(),
    });
    assert_eq!(got, vm);
    assert_eq!(
        got.deadline(),
        Some(vm.instance.as_ref().unwrap().created + chrono::Duration::seconds(vm.lifetime as i64))
    );
    assert_eq!(ctx.ports.store.vm("linux-1").await.unwrap().unwrap().value.instance, None);
    // Written back, it takes the new form.
    let v = ctx.ports.store.vm("linux-0").await.unwrap().unwrap();
    assert!(ctx.ports.store.put_vm(&v.value, Expect::Version(v.version)).await.unwrap());
    let raw: String = redis::cmd("HGET").arg("{test:db}:vm").arg("linux-0").query(&mut conn).unwrap();
    let raw: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!((raw.get("url"), raw["instance"]["internal_ip"].as_str()), (None, Some("10.0.0.7")));
}

/// Corrupt records confined to their entity, on each store.
mod corrupt;
