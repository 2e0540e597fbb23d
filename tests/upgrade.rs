//! Two builds on one Redis, as in a rolling upgrade: a process playing the next build (it writes
//! a field this build does not know into every struct it stores, `GCE_BACKEND_FUTURE_FIELDS=1`)
//! beside a normal one, while Configs grow, shrink, replace on lifetime, drain and change
//! attributes. Nothing is quarantined, nothing replaced beyond what the changes ask, no task
//! dies, and what the newer build stored is still there once the older build rewrote it.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::Duration;

use gce_backend_jobs::Ctx;
use gce_backend_jobs::model::Vm;
use gce_backend_jobs::ports::store::{Expect, VmIndex};
use gce_backend_jobs::{unknown::FUTURE_FIELD, unknown::FUTURE_FIELDS_ENV};
use gce_backend_queues::testing::eventually;
use redis::AsyncCommands;
use serde_json::Value;

use crate::support::{DEPLOYMENT, Procs, pool};

const LIMIT: Duration = Duration::from_secs(120);

/// The VMs of `prefix` that serve (connected, not draining), by hostname.
async fn serving(ctx: &Ctx, prefix: &str) -> Vec<Vm> {
    let ids = ctx.ports.store.vm_ids(VmIndex::OfConfig(prefix.into())).await.unwrap();
    let mut out = Vec::new();
    for id in ids {
        if let Ok(Some(v)) = ctx.ports.store.vm(&id).await {
            out.push(v.value);
        }
    }
    out.into_iter().filter(Vm::serving).collect()
}

/// Waits until `prefix` has exactly `n` VMs, all serving, each for which `also` holds.
async fn settled(ctx: &Ctx, prefix: &str, n: usize, also: impl Fn(&Vm) -> bool) -> Vec<Vm> {
    eventually(&format!("{prefix}: {n} VMs serve"), LIMIT, || async {
        let all = ctx.ports.store.vm_ids(VmIndex::OfConfig(prefix.into())).await.unwrap();
        let up = serving(ctx, prefix).await;
        (all.len() == n && up.len() == n && up.iter().all(&also)).then_some(up)
    })
    .await
}

/// The raw stored records of hash `part` (`vm`, `cfg`), by field.
async fn raw(redis: &mut redis::aio::MultiplexedConnection, part: &str) -> BTreeMap<String, Value> {
    let all: BTreeMap<String, String> = redis.hgetall(format!("{{{DEPLOYMENT}:db}}:{part}")).await.unwrap();
    all.into_iter().map(|(k, v)| (k, serde_json::from_str(&v).unwrap())).collect()
}

/// Every object of `v` by path (a list's items by their `name` or `key` when they have one, so
/// an item keeps its path when others come and go), and whether it holds the future field.
fn objects(v: &Value, path: &str, out: &mut BTreeMap<String, bool>) {
    match v {
        Value::Object(m) => {
            out.insert(path.to_owned(), m.contains_key(FUTURE_FIELD));
            for (k, c) in m.iter().filter(|(k, _)| *k != FUTURE_FIELD) {
                objects(c, &format!("{path}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                let id = c
                    .get("name")
                    .or(c.get("key"))
                    .and_then(Value::as_str)
                    .map_or(i.to_string(), str::to_owned);
                objects(c, &format!("{path}/{id}"), out);
            }
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_build_beside_this_one_loses_nothing_and_destroys_nothing() {
    let timing = "[timing]\nwatch = \"1s\"\nbot_grace = \"3s\"\nobservation_ttl = \"2s\"\nbackoff_base = \"1s\"\nbackoff_cap = \"2s\"\n";
    let env = Procs::start(8, timing).await;
    let write =
        |name: &str, yaml: String| std::fs::write(env.configs.join(format!("{name}.yaml")), yaml).unwrap();
    write("steady", pool("steady", 3, "1d", "10m"));
    write("grow", pool("grow", 2, "1d", "10m"));
    write("life", pool("life", 2, "40s", "10m"));
    write("attrs", pool("attrs", 2, "1d", "10m"));
    let mut newer = env.command();
    newer.args(["--listen", "127.0.0.1:0", "--root-url", "http://localhost"]).env(FUTURE_FIELDS_ENV, "1");
    let newer = newer.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let older = env.spawn();
    let ctx = env.ctx().await;
    let steady: BTreeSet<String> =
        settled(&ctx, "steady", 3, |_| true).await.into_iter().map(|v| v.hostname).collect();
    settled(&ctx, "grow", 2, |_| true).await;
    settled(&ctx, "attrs", 2, |_| true).await;
    let life: BTreeSet<String> =
        settled(&ctx, "life", 2, |_| true).await.into_iter().map(|v| v.hostname).collect();

    // Changes land while both builds run: grow, change attributes (a rolling update), shrink,
    // and the `life` VMs are replaced on their lifetime.
    write("grow", pool("grow", 4, "1d", "10m"));
    write("attrs", pool("attrs", 2, "1d", "10m").replace("team: e2e", "team: e2f"));
    settled(&ctx, "grow", 4, |_| true).await;
    settled(&ctx, "attrs", 2, |v| v.attributes.label.get("team").is_some_and(|t| t == "e2f")).await;
    write("grow", pool("grow", 3, "1d", "10m"));
    settled(&ctx, "grow", 3, |_| true).await;
    settled(&ctx, "life", 2, |v| !life.contains(&v.hostname)).await;

    // The newer build stops (a rollback): what it stored is read, and written back whole, by
    // this build: the running process, and a rewrite of every record here.
    crate::support::terminate(newer.id());
    let mut newer = newer;
    assert!(newer.wait().unwrap().success());
    let mut redis =
        redis::Client::open(env.redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let mut before = BTreeMap::new();
    for part in ["vm", "cfg"] {
        for (k, v) in raw(&mut redis, part).await {
            let mut paths = BTreeMap::new();
            objects(&v, "", &mut paths);
            let held: BTreeSet<String> = paths.into_iter().filter(|(_, f)| *f).map(|(p, _)| p).collect();
            // The same incarnation (a VM) or revision (a Config's file) is the same record.
            let same = v.get("hostname").or(v.get("revision")).cloned();
            before.insert(format!("{part} {k}"), (same, held));
        }
    }
    let carried: usize = before.values().map(|(_, held)| held.len()).sum();
    assert!(carried > 10, "the newer build wrote its field at every level: {before:?}");
    for id in ctx.ports.store.vm_ids(VmIndex::OfConfig("grow".into())).await.unwrap() {
        let cur = ctx.ports.store.vm(&id).await.unwrap().unwrap();
        assert!(
            ctx.ports.store.put_vm(&cur.value, Expect::Version(cur.version)).await.unwrap(),
            "rewrote {id}"
        );
    }
    for c in ctx.ports.store.configs().await.unwrap() {
        assert!(ctx.ports.store.put_config(&c.value, Expect::Version(c.version)).await.unwrap());
    }
    write("grow", pool("grow", 2, "1d", "10m"));
    settled(&ctx, "grow", 2, |_| true).await;
    let mut lost = Vec::new();
    for part in ["vm", "cfg"] {
        for (k, v) in raw(&mut redis, part).await {
            let Some((same, held)) = before.get(&format!("{part} {k}")) else { continue };
            let mut now = BTreeMap::new();
            objects(&v, "", &mut now);
            // A new incarnation is a new VM record; a Config's file changed is a new Config in
            // its record (read from the file), the rest of the record kept.
            let renewed = *same != v.get("hostname").or(v.get("revision")).cloned();
            if renewed && part == "vm" {
                continue;
            }
            lost.extend(
                held.iter()
                    .filter(|p| !(renewed && p.starts_with("/config")))
                    .filter(|p| now.get(*p) == Some(&false))
                    .map(|p| format!("{part} {k}{p}")),
            );
        }
    }
    assert!(lost.is_empty(), "fields the newer build stored were lost: {lost:?}");

    // Nothing quarantined or dead, and nothing replaced beyond what was asked: the steady pool
    // kept its VMs, and every Config's status is clean of quarantines and dead tasks.
    let now: BTreeSet<String> = serving(&ctx, "steady").await.into_iter().map(|v| v.hostname).collect();
    assert_eq!(now, steady, "the steady pool was not touched");
    for prefix in ["steady", "grow", "life", "attrs"] {
        let errors = ctx.ports.store.errors(prefix).await.unwrap();
        let bad: Vec<_> = errors.iter().filter(|e| e.stage == "quarantine" || e.code == "dead").collect();
        assert!(bad.is_empty(), "{prefix}: {bad:?}");
        assert_eq!(ctx.ports.store.counter(prefix, "dead_tasks").await.unwrap(), 0, "{prefix}");
    }
    for q in gce_backend_jobs::tasks::QUEUES {
        assert_eq!(ctx.queues.get(q).counts().await.unwrap().dead, 0, "queue {q}: no dead task");
    }
    let inserts =
        env.sim.with(|w| gce_backend::sim::admin::state_json(w))["inserts"].as_array().unwrap().clone();
    let per = |p: &str| {
        inserts.iter().filter(|i| i["name"].as_str().unwrap().starts_with(&format!("{p}-"))).count()
    };
    // One instance per VM asked for: steady's 3, grow's 4 at most, attrs' 2, one new per
    // outdated VM and the rolling update's surge VM (as with one build: `tests/rollout.rs`).
    assert_eq!((per("steady"), per("grow")), (3, 4), "one instance per VM asked for, no more");
    assert!((4..=5).contains(&per("attrs")), "attrs: 2, then 2 replaced with at most 1 surge: {inserts:?}");
    env.stop(&mut [older]);
}

/// A VM record and a Config record a newer build wrote in a format this build does not act on
/// (a new placement rule it would apply by half): left alone byte for byte, said on the Config's
/// status and counted, never quarantined; the other VMs carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_of_a_newer_format_is_left_to_its_build_not_quarantined() {
    use crate::support::{Backend, Env, sim_config};
    let env =
        Env::start(Backend::Redis, sim_config(), &[("linux", pool("linux", 3, "1d", "10m"))], true).await;
    env.converged("linux", 3).await;
    let mut redis = redis::Client::open(env._redis.as_ref().unwrap().url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let vm_key = format!("{{{DEPLOYMENT}:db}}:vm");
    let mut rec: Value =
        serde_json::from_str(&redis.hget::<_, _, String>(&vm_key, "linux-1").await.unwrap()).unwrap();
    let format = gce_backend_jobs::model::FORMAT + 1;
    rec["format"] = format.into();
    rec["placement"] = serde_json::json!({"rule": "spread", "by": ["zone", "rack"]});
    rec["fault"] = serde_json::json!({"kind": "rack_down", "detail": "a kind this build has no name for", "at": "2026-12-06T10:00:00Z"});
    let newer = rec.to_string();
    let _: () = redis.hset(&vm_key, "linux-1", &newer).await.unwrap();
    // Its handler, and the heal pass that reads every VM record, meet it.
    env.ctx.push(&gce_backend_jobs::tasks::ManageBot { id: "linux-1".into() }).await.unwrap();
    env.ctx.ports.store.rebuild(&gce_backend_jobs::ports::store::Scope::All).await.unwrap();
    let said =
        eventually("the Config's status says the record is left to the newer build", LIMIT, || async {
            let errors = env.ctx.ports.store.errors("linux").await.unwrap();
            errors.into_iter().find(|e| e.stage == "format" && e.code == "newer")
        })
        .await;
    assert!(said.message.contains("vm linux-1") && said.message.contains("newer build"), "{}", said.message);
    // A few more ticks: still there, untouched, never quarantined; the other VMs serve on.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let kept: String = redis.hget(&vm_key, "linux-1").await.unwrap();
    assert_eq!(kept, newer, "left byte for byte");
    let errors = env.ctx.ports.store.errors("linux").await.unwrap();
    assert!(errors.iter().all(|e| e.stage != "quarantine" && e.code != "dead"), "{errors:?}");
    let up = serving(&env.ctx, "linux").await;
    assert_eq!(up.len(), 2, "the other two serve on: {up:?}");
    assert!(env.ctx.metrics.text().contains("records_left_to_newer_build_total{kind=\"vm\"}"));
    let counted = env
        .ctx
        .metrics
        .text()
        .lines()
        .find(|l| l.starts_with("gce_backend_records_left_to_newer_build_total{kind=\"vm\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok());
    assert!(counted.is_some_and(|n| n >= 1), "counted: {counted:?}");
    // A Config record of a newer format: its VMs are left alone too; it is not corrupt.
    let cfg_key = format!("{{{DEPLOYMENT}:db}}:cfg");
    let mut c: Value =
        serde_json::from_str(&redis.hget::<_, _, String>(&cfg_key, "linux").await.unwrap()).unwrap();
    c["format"] = format.into();
    let _: () = redis.hset(&cfg_key, "linux", c.to_string()).await.unwrap();
    assert!(env.ctx.ports.store.corrupt_configs().await.unwrap().is_empty(), "a newer Config is not corrupt");
    env.ctx.push(&gce_backend_jobs::tasks::ExpandConfig { prefix: "linux".into() }).await.unwrap();
    eventually("the Config record is said to be left to the newer build", LIMIT, || async {
        let errors = env.ctx.ports.store.errors("linux").await.unwrap();
        errors.into_iter().find(|e| e.stage == "format" && e.message.contains("cfg linux"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let kept: String = redis.hget(&cfg_key, "linux").await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&kept).unwrap(), c, "the Config record left as it is");
    let st = gce_backend_jobs::fleet::status::status(
        &*env.ctx.ports.store,
        "linux",
        env.ctx.now(),
        chrono::Duration::seconds(60),
        true,
    )
    .await
    .unwrap();
    assert_eq!(st.state, gce_backend_jobs::model::ConfigState::Newer, "its status says whose it is");
    // Its VMs are neither drained nor touched: they are the newer build's to keep.
    let vms: BTreeMap<String, String> = redis.hgetall(&vm_key).await.unwrap();
    assert_eq!(vms.len(), 3, "{vms:?}");
    for (id, raw) in &vms {
        let v: Value = serde_json::from_str(raw).unwrap();
        assert!(
            v.get("drained") != Some(&Value::Bool(true))
                && v.get("terminate_sent").is_none_or(Value::is_null),
            "{id}: {raw}"
        );
    }
    assert_eq!(serving(&env.ctx, "linux").await.len(), 2, "the two this build reads serve on");
    env.stop().await;
}
