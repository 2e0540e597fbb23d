//! One bad thing of each kind at once, on a private `redis-server` and the simulator: a corrupt
//! queue record, a corrupt Config record, a corrupt VM record and a VM index of the wrong type (rebuilt from the records).
//! Each is confined to its entity; a good Config keeps converging and replacing its VMs.

use std::time::Duration;

use gce_backend_queues::When;
use gce_backend_queues::testing::eventually;
use serde_json::json;

use crate::support::{Backend, DEPLOYMENT, Env, pool, sim_config};

const LIMIT: Duration = Duration::from_secs(60);

fn redis(env: &Env, args: &[&str]) {
    let _: redis::Value = query(env, args);
}

/// A raw command's answer as text.
fn redis_out(env: &Env, args: &[&str]) -> String {
    query(env, args)
}

fn query<T: redis::FromRedisValue>(env: &Env, args: &[&str]) -> T {
    let client = redis::Client::open(env._redis.as_ref().unwrap().url().as_str()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let (cmd, rest) = args.split_first().unwrap();
    redis::cmd(cmd).arg(rest).query(&mut conn).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_record_of_each_kind_never_stalls_the_others() {
    let pools = [("linux", pool("linux", 2, "1d", "10m")), ("mac", pool("mac", 2, "1d", "10m"))];
    let env = Env::start(Backend::Redis, sim_config(), &pools, true).await;
    env.converged("linux", 2).await;
    env.converged("mac", 2).await;
    let ns = DEPLOYMENT;
    // 1. A queue task record that is not JSON (a delayed task, so no worker holds it yet).
    let q = env.ctx.queues.get("count_vms");
    let id =
        q.push("nobody", &json!({"prefix": "nobody"}), When::After(Duration::from_secs(2))).await.unwrap();
    redis(&env, &["HSET", &format!("{{{ns}:count_vms}}:rec"), id.task_id(), "{not json"]);
    // 2. A corrupt Config record with no file.
    redis(&env, &["HSET", &format!("{{{ns}:db}}:cfg"), "charlie", "{garbage"]);
    redis(&env, &["HSET", &format!("{{{ns}:db}}:cfg:ver"), "charlie", "1"]);
    // 3. A corrupt VM record of a live pool.
    let old = env.ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value.hostname;
    redis(&env, &["HSET", &format!("{{{ns}:db}}:vm"), "linux-0", "{garbage"]);
    // 4. The VM index of a prefix holding the wrong type.
    redis(&env, &["SET", &format!("{{{ns}:db}}:vm:cfg:ghost"), "x"]);
    redis(&env, &["SADD", &format!("{{{ns}:db}}:vm:cfgs"), "ghost"]);

    eventually("the corrupt task is in the dead set, reason corrupt", LIMIT, || async {
        let dead = q.dead(10).await.unwrap();
        dead.iter().any(|t| t.task_id == id.task_id() && t.reason == "corrupt").then_some(())
    })
    .await;
    eventually("the corrupt Config without a file is deleted", LIMIT, || async {
        let gone = env.ctx.ports.store.corrupt_configs().await.unwrap().is_empty();
        let errors = env.ctx.ports.store.errors("charlie").await.unwrap();
        (gone && errors.iter().any(|e| e.code == "deleted")).then_some(())
    })
    .await;
    let replaced = eventually("linux-0 is rebuilt, drained and replaced", LIMIT, || async {
        let vm = env.ctx.ports.store.vm("linux-0").await.ok()??.value;
        (vm.hostname != old && vm.connected.is_some() && !vm.drained).then_some(vm.hostname)
    })
    .await;
    assert!(!env.instances("linux").contains_key(&old), "its old instance went through the normal path");
    assert!(env.instances("linux").contains_key(&replaced));
    eventually("the broken index is rebuilt from the records (none: ghost is gone)", LIMIT, || async {
        let typ = redis_out(&env, &["TYPE", &format!("{{{ns}:db}}:vm:cfg:ghost")]);
        let listed = env.ctx.ports.store.vm_configs().await.ok()?;
        (typ == "none" && !listed.iter().any(|p| p == "ghost")).then_some(())
    })
    .await;
    // The good Configs go on: a preempted instance of mac is replaced, both converge.
    let victim = env.vms("mac").await[0].hostname.clone();
    let r = reqwest::Client::new()
        .post(format!("{}/sim/preempt", env.sim_url))
        .json(&json!({"project": "my-proj", "zone": "us-central1-b", "name": victim}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    eventually("mac's preempted VM is replaced", LIMIT, || async {
        (!env.vms("mac").await.iter().any(|v| v.hostname == victim)).then_some(())
    })
    .await;
    env.converged("mac", 2).await;
    env.converged("linux", 2).await;
    let report = env.report(true).await;
    let prefixes: Vec<&str> = report.configs.iter().map(|c| c.prefix.as_str()).collect();
    assert!(
        prefixes.contains(&"linux") && prefixes.contains(&"mac") && !prefixes.contains(&"ghost"),
        "{prefixes:?}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_and_a_malformed_swarming_server_leave_a_good_config_alone() {
    use gce_backend_jobs::config::Secs;
    let mut s = crate::support::settings();
    // Fewer workers per queue than hanging VMs: without the per-server limit they could all hang.
    s.concurrency = 4;
    s.isolation = gce_backend_jobs::ports::guard::Isolation {
        calls_per_server: 2,
        trip_after: 2,
        swarming_timeout: Secs(2),
        open_base: Secs(5),
        ..Default::default()
    };
    let on = |server: &str, yaml: String| yaml.replace("https://swarm.example.com", server);
    let pools = [
        ("good", pool("good", 2, "8s", "10m")),
        ("hang", on("https://hang.example.com", pool("hang", 6, "1d", "10m"))),
        ("bad", on("https://bad.example.com", pool("bad", 3, "1d", "10m"))),
    ];
    let env = Env::start_with(Backend::Redis, sim_config(), &[], true, s).await;
    env.faults(json!({"swarming_servers": {"hang.example.com": "hang", "bad.example.com": "malformed"}}))
        .await;
    for (name, yaml) in &pools {
        env.write_pool(name, yaml);
    }
    env.converged("good", 2).await;
    // The good pool keeps replacing its VMs past their lifetime while the others misbehave.
    let first: Vec<String> = env.vms("good").await.into_iter().map(|v| v.hostname).collect();
    eventually("both good VMs are replaced by new connected incarnations", LIMIT, || async {
        let vms = env.vms("good").await;
        let fresh = vms.iter().filter(|v| !first.contains(&v.hostname) && v.connected.is_some()).count();
        (fresh == 2).then_some(())
    })
    .await;
    for prefix in ["hang", "bad"] {
        eventually(
            &format!("{prefix}'s status says its Swarming server is not answering"),
            LIMIT,
            || async {
                let errors = env.ctx.ports.store.errors(prefix).await.unwrap();
                errors.iter().any(|e| e.code == "swarming_unavailable").then_some(())
            },
        )
        .await;
        assert_eq!(env.counts(prefix).await.connected, 0, "{prefix}: no bot can be seen");
    }
    env.stop().await;
}
