//! End-to-end tests of the reconcile pipeline: the service (in process, or as processes) on a
//! private `redis-server` (or the embedded in-memory default), against the simulator over HTTP
//! through the official Compute client and the pRPC Swarming client.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

use gce_backend::sim::SimConfig;
use gce_backend_queues::testing::eventually;
use serde_json::json;

use crate::support::{Backend, DEPLOYMENT, Env, pool, sim_config};

const LIMIT: Duration = Duration::from_secs(60);

/// Every instance RUNNING and every bot alive, for `prefix`.
fn all_running(env: &Env, prefix: &str, n: usize) {
    let inst = env.instances(prefix);
    assert_eq!(inst.len(), n, "{inst:?}");
    assert!(inst.values().all(|s| s == "RUNNING"), "{inst:?}");
    let bots = env.bots();
    for name in inst.keys() {
        let b = &bots[name];
        assert!(b.get("isDead").is_none() && b.get("deleted").is_none(), "{b}");
    }
}

// ---- (i) ---------------------------------------------------------------------------------

async fn three_instances_run_and_three_bots_connect(backend: Backend) {
    let started = Instant::now();
    let env = Env::start(backend, sim_config(), &[("linux", pool("linux", 3, "1d", "10m"))], true).await;
    env.converged("linux", 3).await;
    eprintln!(
        "(i) {backend:?}: amount 3 converged (3 RUNNING, 3 bots connected) in {:.2?}",
        started.elapsed()
    );
    all_running(&env, "linux", 3);
    let vms = env.vms("linux").await;
    let ids: BTreeSet<&str> = vms.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, BTreeSet::from(["linux-0", "linux-1", "linux-2"]));
    for v in &vms {
        assert!(v.hostname.starts_with(&format!("{}-", v.id)) && v.hostname.len() == v.id.len() + 5);
        assert!(v.instance.as_ref().is_some_and(|i| !i.external_ip.is_empty()) && v.connected.is_some());
    }
    let state = env.state();
    let labels = &state["instances"][0]["labels"];
    assert_eq!(labels["gce-backend"], DEPLOYMENT);
    assert_eq!(labels["gce-backend-config"], "linux");
    assert_eq!(labels["team"], "e2e");
    env.stop().await;
}

// ---- (ii) --------------------------------------------------------------------------------

async fn shrinking_terminates_bots_after_their_task_and_deletes_everything(backend: Backend) {
    let cfg = SimConfig { bot_task_ms: 1500, bot_idle_ms: 300, ..sim_config() };
    let env = Env::start(backend, cfg, &[("linux", pool("linux", 3, "1d", "10m"))], true).await;
    env.converged("linux", 3).await;
    let before: BTreeMap<String, String> =
        env.vms("linux").await.into_iter().map(|v| (v.id, v.hostname)).collect();
    env.write_pool("linux", &pool("linux", 1, "1d", "10m"));
    env.converged("linux", 1).await;
    let after = env.vms("linux").await;
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].hostname, before["linux-0"], "the VM that stays is untouched");
    eventually("the removed instances are gone", LIMIT, || async {
        (env.instances("linux").len() == 1).then_some(())
    })
    .await;
    let bots = env.bots();
    for id in ["linux-1", "linux-2"] {
        let b = &bots[&before[id]];
        assert_eq!(b["deleted"], true, "{id}'s bot is deleted from Swarming: {b}");
        assert!(b["terminationTaskId"].is_string(), "{id}'s bot was terminated gracefully: {b}");
        assert!(env.ctx.ports.store.vm(id).await.unwrap().is_none(), "{id}'s record is gone");
    }
    env.stop().await;
}

// ---- (iii) -------------------------------------------------------------------------------

async fn an_instance_past_its_lifetime_is_replaced_under_a_new_hostname(backend: Backend) {
    let env = Env::start(backend, sim_config(), &[("linux", pool("linux", 1, "4s", "10m"))], true).await;
    env.converged("linux", 1).await;
    let first = env.vms("linux").await[0].hostname.clone();
    let second = eventually("a new incarnation runs with a connected bot", LIMIT, || async {
        let vms = env.vms("linux").await;
        vms.first().filter(|v| v.hostname != first && v.connected.is_some()).map(|v| v.hostname.clone())
    })
    .await;
    assert!(second.starts_with("linux-0-"));
    eventually("the old instance is gone", LIMIT, || async {
        (!env.instances("linux").contains_key(&first)).then_some(())
    })
    .await;
    assert!(env.bots()[&first]["terminationTaskId"].is_string(), "the old bot was terminated first");
    env.stop().await;
}

// ---- (iv) --------------------------------------------------------------------------------

async fn an_instance_whose_bot_never_connects_is_destroyed_after_the_timeout(backend: Backend) {
    let env = Env::start(backend, sim_config(), &[], true).await;
    env.faults(json!({"bot_never_connect_rate": 1.0})).await;
    env.write_pool("linux", &pool("linux", 1, "1d", "3s"));
    let first = eventually("the first instance runs", LIMIT, || async {
        env.instances("linux").into_iter().find(|(_, s)| s == "RUNNING").map(|(n, _)| n)
    })
    .await;
    eventually("it is destroyed after the timeout", LIMIT, || async {
        let ops = env.state()["operations"].clone();
        let deleted =
            ops.as_array().unwrap().iter().any(|o| o["type"] == "delete" && o["target"] == first.as_str());
        (deleted && !env.instances("linux").contains_key(&first)).then_some(())
    })
    .await;
    let next = eventually("a new incarnation is created", LIMIT, || async {
        env.vms("linux")
            .await
            .first()
            .filter(|v| v.hostname != first && v.instance.is_some())
            .map(|v| v.hostname.clone())
    })
    .await;
    assert_ne!(next, first);
    assert!(env.counts("linux").await.connected == 0, "no bot ever connected");
    env.stop().await;
}

// ---- (v) ---------------------------------------------------------------------------------

async fn removing_a_config_file_removes_everything_of_that_config(backend: Backend) {
    let pools = [("linux", pool("linux", 2, "1d", "10m")), ("mac", pool("mac", 2, "1d", "10m"))];
    let env = Env::start(backend, sim_config(), &pools, true).await;
    env.converged("linux", 2).await;
    env.converged("mac", 2).await;
    let mac: Vec<String> = env.vms("mac").await.into_iter().map(|v| v.hostname).collect();
    std::fs::remove_file(env.dir.join("mac.yaml")).unwrap();
    eventually("everything of mac is gone", LIMIT, || async {
        let gone = env.instances("mac").is_empty()
            && env.vms("mac").await.is_empty()
            && env.ctx.ports.store.config("mac").await.unwrap().is_none()
            && env.ctx.ports.store.counts("mac").await.unwrap().is_none();
        gone.then_some(())
    })
    .await;
    let bots = env.bots();
    for h in &mac {
        assert_eq!(bots[h]["deleted"], true, "{h}");
    }
    all_running(&env, "linux", 2);
    env.converged("linux", 2).await;
    env.stop().await;
}

/// `on!(module, Backend, tests…)`: the tests, each run on that backend, in a module of its own.
macro_rules! on {
    ($module:ident, $backend:ident, $($name:ident),* $(,)?) => {
        mod $module {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::Backend::$backend).await } )*
        }
    };
}

/// Every test on Redis and, (xi), on the embedded default, which passes (i)–(v).
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        on!(redis, Redis, $($name),*);
        on!(embedded, Memory, $($name),*);
    };
}

both!(
    three_instances_run_and_three_bots_connect,
    shrinking_terminates_bots_after_their_task_and_deletes_everything,
    an_instance_past_its_lifetime_is_replaced_under_a_new_hostname,
    an_instance_whose_bot_never_connects_is_destroyed_after_the_timeout,
    removing_a_config_file_removes_everything_of_that_config,
);

// Every production Redis mode runs the pipeline: TLS, Sentinel, Cluster.
on!(tls, Tls, three_instances_run_and_three_bots_connect);
on!(sentinel, Sentinel, three_instances_run_and_three_bots_connect);
// The whole pipeline on a cluster whose store is in key layout 2 (each Config's keys in a slot of
// their own), queues partitioned.
on!(
    cluster_layout_2,
    ClusterLayout2,
    three_instances_run_and_three_bots_connect,
    shrinking_terminates_bots_after_their_task_and_deletes_everything,
    an_instance_past_its_lifetime_is_replaced_under_a_new_hostname,
    an_instance_whose_bot_never_connects_is_destroyed_after_the_timeout,
    removing_a_config_file_removes_everything_of_that_config,
);
// A cluster also shrinks (its keys of several slots, queues and store).
on!(
    cluster,
    Cluster,
    three_instances_run_and_three_bots_connect,
    shrinking_terminates_bots_after_their_task_and_deletes_everything
);
