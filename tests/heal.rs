//! Derived keys heal themselves: on Redis, a VM index, the deadline, hostname or created index,
//! what each VM counts or a Config's sums that is of the wrong type, missing or wrong is found
//! and rebuilt from the VM records; writes meanwhile still land; a rebuild racing writes loses
//! nothing; every cron job runs past such a key; a Config whose index was a string converges.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use gce_backend::adapters::redis_store::RedisStore;
use gce_backend_jobs::model::{SUMS, Vm};
use gce_backend_jobs::ports::store::{Expect, Scope, Store};
use gce_backend_jobs::testing::created;
use gce_backend_queues::testing::{RedisServer, eventually};

use crate::support::{Backend, DEPLOYMENT, Env, pool, sim_config, wall_now};

/// A raw connection to the test's Redis.
fn raw(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// Runs a raw command, ignoring its answer.
fn cmd(conn: &mut redis::Connection, args: &[&str]) {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    let _: redis::Value = c.query(conn).unwrap();
}

/// Every derived key as the VM records say it should be: key → its entries as strings.
fn expected(vms: &[Vm]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut sums: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for vm in vms {
        let mut add = |k: &str, v: String| out.entry(k.to_owned()).or_default().insert(v);
        add(if vm.instance.is_some() { "vm:created" } else { "vm:uncreated" }, vm.id.clone());
        add("vm:host", format!("{}={}", vm.hostname, vm.id));
        add("vm:cfgs", vm.config.clone());
        add(&format!("vm:cfg:{}", vm.config), vm.id.clone());
        add("vm:counted", format!("{}={}", vm.id, vm.counted()));
        add("vm:zoned", format!("{}={}@{}", vm.id, vm.counted(), vm.zone()));
        if let Some(d) = vm.deadline() {
            add("vm:deadline", format!("{}@{}", vm.id, d.timestamp_millis()));
        }
        let s = sums.entry(vm.config.clone()).or_default();
        for i in (0..SUMS).filter(|i| vm.counted() >> i & 1 == 1) {
            *s.entry(i.to_string()).or_default() += 1;
            *s.entry(format!("{}/{i}", vm.zone())).or_default() += 1;
        }
    }
    for (prefix, s) in sums {
        out.insert(format!("sums:{prefix}"), s.into_iter().map(|(f, n)| format!("{f}={n}")).collect());
    }
    out
}

/// Every derived key as Redis holds it (same shape; fields at zero and `complete` left out).
fn held(conn: &mut redis::Connection) -> BTreeMap<String, BTreeSet<String>> {
    let tag = format!("{{{DEPLOYMENT}:db}}:");
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{tag}*")).query(conn).unwrap();
    let mut out = BTreeMap::new();
    for key in keys {
        let part = key.strip_prefix(&tag).unwrap().to_owned();
        let derived = part.starts_with("vm:") && !matches!(part.as_str(), "vm:ver" | "vm:idx")
            || part.starts_with("sums:");
        if !derived || part == "vm" {
            continue;
        }
        let typ: String = redis::cmd("TYPE").arg(&key).query(conn).unwrap();
        let entries: BTreeSet<String> = match typ.as_str() {
            "set" => redis::cmd("SMEMBERS").arg(&key).query(conn).unwrap(),
            "hash" => {
                let h: BTreeMap<String, String> = redis::cmd("HGETALL").arg(&key).query(conn).unwrap();
                h.into_iter()
                    .filter(|(f, v)| f != "complete" && v != "0")
                    .map(|(f, v)| format!("{f}={v}"))
                    .collect()
            }
            "zset" => {
                let z: Vec<(String, i64)> =
                    redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).arg("WITHSCORES").query(conn).unwrap();
                z.into_iter().map(|(m, s)| format!("{m}@{s}")).collect()
            }
            other => [format!("<{other}>")].into(),
        };
        if !entries.is_empty() {
            out.insert(part, entries);
        }
    }
    out
}

/// The VM records, read one by one.
async fn records(store: &dyn Store, ids: impl IntoIterator<Item = String>) -> Vec<Vm> {
    let mut out = Vec::new();
    for id in ids {
        if let Some(v) = store.vm(&id).await.unwrap() {
            out.push(v.value);
        }
    }
    out
}

/// VM `id` of Config `prefix` in `zone`, with an instance made `age` ago when `age` is set.
fn vm(id: &str, zone: &str, age: Option<chrono::Duration>) -> Vm {
    let (prefix, index) = gce_backend_jobs::naming::parse_id(id).unwrap();
    let mut v = Vm {
        id: id.into(),
        config: prefix.into(),
        index,
        hostname: format!("{id}-abcd"),
        lifetime: 86_400,
        configured: wall_now(),
        ..Default::default()
    };
    v.attributes.zone = zone.into();
    if let Some(age) = age {
        created(wall_now() - age)(&mut v);
        v.connected = Some(wall_now());
    }
    v
}

/// What the store must find and heal, as the cron job and task of `count_vms` look for it.
async fn heal(store: &dyn Store, prefixes: &[&str]) -> Vec<Scope> {
    let mut scopes = store.heal_requests().await.unwrap();
    for p in prefixes {
        if !store.derived_sound(p).await.unwrap() {
            scopes.push(Scope::Config((*p).into()));
        }
    }
    // The full comparison, once per sweep period.
    scopes.push(Scope::All);
    for s in &scopes {
        store.rebuild(s).await.unwrap();
    }
    scopes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_derived_key_heals_from_the_records_and_writes_land_meanwhile() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), DEPLOYMENT).await.unwrap();
    let mut conn = raw(&server.url());
    let day = chrono::Duration::days(1);
    let vms = [
        vm("alpha-0", "za", Some(day * 2)),
        vm("alpha-1", "zb", Some(chrono::Duration::hours(1))),
        vm("alpha-2", "za", None),
        vm("bravo-0", "za", Some(chrono::Duration::hours(2))),
        vm("bravo-1", "zb", None),
    ];
    for v in &vms {
        assert!(store.put_vm(v, Expect::Absent).await.unwrap());
    }
    heal(&store, &["alpha", "bravo"]).await;
    let truth = expected(&vms);
    assert_eq!(held(&mut conn), truth, "the scripts keep every derived key");
    let t = |k: &str| format!("{{{DEPLOYMENT}:db}}:{k}");
    // (key, how it is damaged, whether the damage is of the wrong type)
    let cases: Vec<(&str, Vec<Vec<String>>, bool)> = vec![
        (
            "vm:cfg:bravo",
            vec![vec!["DEL".into(), t("vm:cfg:bravo")], vec!["SET".into(), t("vm:cfg:bravo"), "x".into()]],
            true,
        ),
        (
            "sums:bravo",
            vec![vec!["DEL".into(), t("sums:bravo")], vec!["SET".into(), t("sums:bravo"), "x".into()]],
            true,
        ),
        (
            "vm:deadline",
            vec![vec!["DEL".into(), t("vm:deadline")], vec!["SET".into(), t("vm:deadline"), "x".into()]],
            true,
        ),
        (
            "vm:host",
            vec![vec!["DEL".into(), t("vm:host")], vec!["LPUSH".into(), t("vm:host"), "x".into()]],
            true,
        ),
        (
            "vm:created",
            vec![vec!["DEL".into(), t("vm:created")], vec!["SET".into(), t("vm:created"), "x".into()]],
            true,
        ),
        (
            "vm:counted",
            vec![vec!["DEL".into(), t("vm:counted")], vec!["SADD".into(), t("vm:counted"), "x".into()]],
            true,
        ),
        (
            "vm:zoned",
            vec![vec!["DEL".into(), t("vm:zoned")], vec!["SET".into(), t("vm:zoned"), "x".into()]],
            true,
        ),
        (
            "vm:cfgs",
            vec![vec!["DEL".into(), t("vm:cfgs")], vec!["SET".into(), t("vm:cfgs"), "x".into()]],
            true,
        ),
        ("vm:cfg:bravo (missing)", vec![vec!["DEL".into(), t("vm:cfg:bravo")]], false),
        ("vm:host (missing)", vec![vec!["DEL".into(), t("vm:host")]], false),
        ("vm:deadline (missing)", vec![vec!["DEL".into(), t("vm:deadline")]], false),
        ("sums:bravo (wrong)", vec![vec!["HINCRBY".into(), t("sums:bravo"), "3".into(), "5".into()]], false),
        (
            "vm:deadline (wrong)",
            vec![
                vec!["ZADD".into(), t("vm:deadline"), "1".into(), "bravo-0".into()],
                vec!["ZADD".into(), t("vm:deadline"), "1".into(), "ghost-7".into()],
            ],
            false,
        ),
        ("vm:cfg:alpha (ghost)", vec![vec!["SADD".into(), t("vm:cfg:alpha"), "alpha-9".into()]], false),
    ];
    for (name, damage, wrong_type) in cases {
        for d in &damage {
            cmd(&mut conn, &d.iter().map(String::as_str).collect::<Vec<_>>());
        }
        // A write of a VM of each Config lands all the same (the same value again).
        for id in ["alpha-1", "bravo-0"] {
            let cur = store.vm(id).await.unwrap().unwrap();
            assert!(
                store.put_vm(&cur.value, Expect::Version(cur.version)).await.unwrap(),
                "{name}: write of {id}"
            );
        }
        if wrong_type {
            let flagged = store.heal_requests().await.unwrap();
            let unsound = !store.derived_sound("bravo").await.unwrap();
            assert!(!flagged.is_empty() || unsound, "{name}: found by the cheap checks");
        }
        heal(&store, &["alpha", "bravo"]).await;
        assert_eq!(held(&mut conn), truth, "{name}: rebuilt to what the records say");
        assert!(store.heal_requests().await.unwrap().is_empty(), "{name}: nothing left to heal");
        assert!(store.derived_sound("bravo").await.unwrap(), "{name}");
    }
    // A sound store: a rebuild finds nothing to change.
    let r = store.rebuild(&Scope::All).await.unwrap();
    assert!(!r.changed(), "{r:?}");
    assert_eq!(r.vms, vms.len());
    // A record that does not decode is named (to be quarantined); its entries stay.
    cmd(&mut conn, &["HSET", &t("vm"), "alpha-2", "{garbage"]);
    let r = store.rebuild(&Scope::Config("alpha".into())).await.unwrap();
    assert_eq!((r.changed(), r.corrupt), (false, vec!["alpha-2".to_owned()]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_racing_writes_loses_nothing() {
    let server = RedisServer::start();
    let store = Arc::new(RedisStore::connect(&server.url(), DEPLOYMENT).await.unwrap());
    let mut conn = raw(&server.url());
    for i in 0..300 {
        let age = (i % 3 != 0).then(|| chrono::Duration::minutes(i64::from(i)));
        assert!(
            store
                .put_vm(&vm(&format!("bravo-{i}"), ["za", "zb"][i as usize % 2], age), Expect::Absent)
                .await
                .unwrap()
        );
    }
    for k in ["vm:cfg:bravo", "vm:deadline", "sums:bravo", "vm:host"] {
        cmd(&mut conn, &["DEL", &format!("{{{DEPLOYMENT}:db}}:{k}")]);
        cmd(&mut conn, &["SET", &format!("{{{DEPLOYMENT}:db}}:{k}"), "x"]);
    }
    // Writers: new VMs, deletions, instances made and lost, while rebuilds run.
    let mut writers = Vec::new();
    for w in 0..4u32 {
        let store = store.clone();
        writers.push(tokio::spawn(async move {
            for n in 0..150u32 {
                let i = (n * 7 + w * 53) % 400;
                let id = format!("bravo-{i}");
                match store.vm(&id).await.unwrap() {
                    None => {
                        store.put_vm(&vm(&id, "zc", None), Expect::Absent).await.unwrap();
                    }
                    Some(cur) if n % 5 == 0 => {
                        store.delete_vm(&id, cur.version).await.unwrap();
                    }
                    Some(cur) => {
                        let mut v = cur.value;
                        match v.instance {
                            Some(_) => v.instance = None,
                            None => created(wall_now())(&mut v),
                        }
                        store.put_vm(&v, Expect::Version(cur.version)).await.unwrap();
                    }
                }
            }
        }));
    }
    let mut rebuilds = 0;
    while !writers.iter().all(|w| w.is_finished()) {
        let scope = if rebuilds % 2 == 0 { Scope::Config("bravo".into()) } else { Scope::All };
        store.rebuild(&scope).await.unwrap();
        rebuilds += 1;
    }
    for w in writers {
        w.await.unwrap();
    }
    let ids: Vec<String> = (0..400).map(|i| format!("bravo-{i}")).collect();
    let now = records(&*store, ids).await;
    assert_eq!(held(&mut conn), expected(&now), "after {rebuilds} rebuilds racing 600 writes");
    assert!(rebuilds >= 2, "the rebuilds ran while the writes did ({rebuilds})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cron_job_runs_past_a_key_of_the_wrong_type() {
    let pools = [
        ("alpha", pool("alpha", 2, "1d", "10m")),
        ("bravo", pool("bravo", 2, "1d", "10m")),
        ("charlie", pool("charlie", 1, "1d", "10m")),
    ];
    let env = Env::start(Backend::Redis, sim_config(), &pools, false).await;
    let ctx = &env.ctx;
    let url = env._redis.as_ref().unwrap().url();
    let mut conn = raw(&url);
    gce_backend_jobs::cron::run(ctx, "import_configs").await.unwrap();
    let day = chrono::Duration::days(1);
    let mut seeded = Vec::new();
    for (id, age) in [("alpha-0", day * 2), ("alpha-1", day / 2), ("bravo-0", day / 2), ("bravo-1", day / 2)]
    {
        let mut v = vm(id, "us-central1-b", Some(age));
        v.attributes.project = "my-proj".into();
        assert!(ctx.ports.store.put_vm(&v, Expect::Absent).await.unwrap());
        seeded.push(v);
    }
    let t = |k: &str| format!("{{{DEPLOYMENT}:db}}:{k}");
    let kinds = [
        ("VM index", vec![t("vm:cfg:bravo")]),
        ("deadline index", vec![t("vm:deadline")]),
        ("zone sums", vec![t("sums:bravo")]),
        (
            "indexes of VMs with and without an instance, by hostname",
            vec![t("vm:created"), t("vm:uncreated"), t("vm:host")],
        ),
        ("prefixes with VMs", vec![t("vm:cfgs")]),
    ];
    for (kind, keys) in kinds {
        for k in &keys {
            cmd(&mut conn, &["DEL", k]);
            cmd(&mut conn, &["SET", k, "x"]);
        }
        // A Config record that does not decode, each time.
        cmd(&mut conn, &["HSET", &t("cfg"), "charlie", "{garbage"]);
        for job in gce_backend_jobs::cron::names() {
            let ran = gce_backend_jobs::cron::run(ctx, job).await;
            assert!(ran.is_ok(), "{job} with a wrong-type {kind}: {ran:?}");
            if job == "manage_bots" && kind != "deadline index" {
                // alpha-0's deadline passed: its bot is looked at (the replacement's first step).
                let q = ctx.queues.get("manage_bot");
                let keys: Vec<String> =
                    q.pending(1000, 0).await.unwrap().into_iter().map(|t| t.key).collect();
                assert!(keys.iter().any(|k| k == "alpha-0"), "{kind}: alpha-0 due and pushed: {keys:?}");
                q.purge_pending().await.unwrap();
            }
            if job == "drain_vms" && kind == "VM index" {
                let e = ctx.ports.store.errors("bravo").await.unwrap();
                assert!(
                    e.iter().any(|e| e.stage == "index" && e.code == "unreadable" && e.resolved.is_none()),
                    "noted on bravo's status: {e:?}"
                );
            }
        }
        // count_vms (among the jobs) has rebuilt what was wrong: the keys are as the records say.
        let ids = seeded.iter().map(|v| v.id.clone());
        assert_eq!(held(&mut conn), expected(&records(&*ctx.ports.store, ids).await), "{kind}: healed");
        if kind == "VM index" {
            let e = ctx.ports.store.errors("bravo").await.unwrap();
            assert!(e.iter().any(|e| e.stage == "index" && e.code == "rebuilt"), "{e:?}");
            assert!(e.iter().filter(|e| e.stage == "index").all(|e| e.resolved.is_some()), "{e:?}");
        }
        // The manage_bots of the deadline case runs after the rebuild, and finds alpha-0.
        if kind == "deadline index" {
            gce_backend_jobs::cron::run(ctx, "manage_bots").await.unwrap();
            let pending = ctx.queues.get("manage_bot").pending(1000, 0).await.unwrap();
            assert!(pending.iter().any(|t| t.key == "alpha-0"), "alpha-0 pushed once the index is back");
            ctx.queues.get("manage_bot").purge_pending().await.unwrap();
        }
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_whose_index_became_a_string_grows_and_heals_with_no_dead_task() {
    let pools = [("alpha", pool("alpha", 2, "1d", "10m")), ("bravo", pool("bravo", 3, "1d", "10m"))];
    let env = Env::start(Backend::Redis, sim_config(), &pools, true).await;
    env.converged("alpha", 2).await;
    env.converged("bravo", 3).await;
    let url = env._redis.as_ref().unwrap().url();
    let mut conn = raw(&url);
    let key = format!("{{{DEPLOYMENT}:db}}:vm:cfg:bravo");
    cmd(&mut conn, &["DEL", &key]);
    cmd(&mut conn, &["SET", &key, "x"]);
    env.write_pool("bravo", &pool("bravo", 5, "1d", "10m"));
    eventually("bravo's index is a set again", Duration::from_secs(30), || {
        let typ: String = redis::cmd("TYPE").arg(&key).query(&mut conn).unwrap();
        async move { (typ == "set").then_some(()) }
    })
    .await;
    env.converged("bravo", 5).await;
    let st = env.status("bravo", true).await;
    assert_eq!(st.dead_tasks, 0, "no task died: {:?}", st.errors);
    assert!(st.errors.iter().any(|e| e.stage == "index" && e.code == "rebuilt"), "{:?}", st.errors);
    let mut dead = 0;
    for q in gce_backend_jobs::tasks::QUEUES {
        dead += env.ctx.queues.get(q).dead(1000).await.unwrap().len();
    }
    assert_eq!(dead, 0, "no dead task in any queue");
    env.stop().await;
}
