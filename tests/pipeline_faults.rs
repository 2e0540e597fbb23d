//! End-to-end scenarios under faults, on a private Redis and the simulator: 30 % of calls failing,
//! exhausted quota, leaked instances and stale bots, handlers run twice and at once, and two
//! service processes sharing one Redis.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::process::Command;
use std::time::Duration;

use gce_backend::server::{self, Role, RunOptions};
use gce_backend_jobs::cron;
use gce_backend_jobs::tasks;
use gce_backend_jobs::tasks::*;
use gce_backend_jobs::work::Next;
use gce_backend_jobs::{Ctx, TaskError};
use gce_backend_queues::testing::{RedisServer, eventually};
use serde_json::json;

use crate::support::Procs;
use crate::support::{Backend, DEPLOYMENT, Env, pool, settings, sim_config};

const LIMIT: Duration = Duration::from_secs(90);

// ---- (vi) --------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_percent_of_calls_failing_with_503_still_converges() {
    let env = Env::start(Backend::Redis, sim_config(), &[], true).await;
    env.faults(json!({"errors": {"*": {"rate": 0.3, "status": 503}}})).await;
    env.write_pool("linux", &pool("linux", 3, "1d", "10m"));
    env.converged("linux", 3).await;
    let calls = all_calls(&env).await;
    let failed: u64 = calls["calls"].as_object().unwrap().values().filter_map(|m| m["503"].as_u64()).sum();
    assert!(failed > 0, "faults were injected: {calls}");
    let inserts = env.inserts();
    assert_eq!(inserts.len(), 3, "no hostname churn: {inserts:?}");
    env.stop().await;
}

// ---- (vii) -------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_quota_keeps_names_shows_quota_exceeded_and_converges_once_freed() {
    let env = Env::start(Backend::Redis, sim_config(), &[], true).await;
    // e2-standard-2 is 2 CPUs: room for two of the three.
    env.faults(json!({"quotas": {"us-central1": {"cpus": 4.0, "instances": 100}}})).await;
    env.write_pool("linux", &pool("linux", 3, "1d", "10m"));
    let starved = eventually("two run, one is refused for quota", LIMIT, || async {
        let vms = env.vms("linux").await;
        let waiting: Vec<_> = vms.iter().filter(|v| v.instance.is_none()).collect();
        let errors = env.ctx.ports.store.errors("linux").await.unwrap();
        let quota = errors.iter().any(|e| e.code == "QUOTA_EXCEEDED" && e.stage == "create_instance");
        (vms.len() == 3 && waiting.len() == 1 && quota).then(|| waiting[0].hostname.clone())
    })
    .await;
    // A success in the zone clears its backoff, the starved VM's next try sets it again.
    let b = eventually("the zone is backed off", LIMIT, || async {
        env.ctx.ports.store.backoff("my-proj", "us-central1-b").await.unwrap()
    })
    .await;
    assert_eq!(b.reason, "QUOTA_EXCEEDED");
    // The operator's view: `gce-backend status`, over the API.
    let out = Command::new(crate::support::BIN)
        .args(["status", "--live", "linux"])
        .env("GCE_BACKEND_ROOT_URL", env.api_url.as_deref().unwrap())
        .env("GCE_BACKEND_TOKEN", crate::api::ADMIN)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let status = &status["configs"];
    let errors = status[0]["errors"].as_array().unwrap();
    assert!(errors.iter().any(|e| e["code"] == "QUOTA_EXCEEDED"
        && e["zone"] == "us-central1-b"
        && e["stage"] == "create_instance"));
    assert!(
        errors.iter().any(|e| e["operation"].as_str().is_some_and(|o| o.starts_with("operation-"))),
        "with the operation id"
    );
    assert_eq!(status[0]["prefix"], "linux");
    assert_eq!(status[0]["counts"]["configured"], 3);
    assert_eq!(status[0]["counts"]["created"], 2);
    // Several backoff rounds later the name has not changed.
    eventually("the quota error repeats", LIMIT, || async {
        let n = env
            .ctx
            .ports
            .store
            .errors("linux")
            .await
            .unwrap()
            .iter()
            .filter(|e| e.code == "QUOTA_EXCEEDED")
            .count();
        (n >= 3).then_some(())
    })
    .await;
    let names: BTreeSet<String> = env.vms("linux").await.into_iter().map(|v| v.hostname).collect();
    assert!(names.contains(&starved), "no name churn");
    assert_eq!(env.inserts().len(), 3, "only three hostnames were ever inserted");

    env.faults(json!({"quotas": {}})).await;
    env.converged("linux", 3).await;
    assert!(env.instances("linux").contains_key(&starved), "the same name got its instance");
    assert!(
        env.ctx.ports.store.backoff("my-proj", "us-central1-b").await.unwrap().is_none(),
        "backoff cleared on success"
    );
    env.stop().await;
}

// ---- (viii) ------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaked_instance_with_our_label_is_deleted_and_a_foreign_one_is_untouched() {
    let env =
        Env::start(Backend::Redis, sim_config(), &[("linux", pool("linux", 1, "1d", "10m"))], true).await;
    env.converged("linux", 1).await;
    let http = reqwest::Client::new();
    let insert = |name: &str, labels: serde_json::Value| {
        let body = json!({"name": name, "machineType": "zones/us-central1-b/machineTypes/e2-small", "labels": labels,
            "metadata": {"items": [{"key": "swarming-server", "value": "https://swarm.example.com"}]},
            "networkInterfaces": [{"network": "global/networks/default"}]});
        http.post(format!("{}/compute/v1/projects/my-proj/zones/us-central1-b/instances", env.sim_url))
            .json(&body)
            .send()
    };
    assert_eq!(
        insert("linux-7-leak", json!({"gce-backend": DEPLOYMENT, "gce-backend-vm": "linux-7"}))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(insert("foreign-1", json!({"team": "someone-else"})).await.unwrap().status(), 200);
    assert_eq!(
        insert("linux-8-othr", json!({"gce-backend": "another-deployment"})).await.unwrap().status(),
        200
    );
    eventually("the leaked instance is deleted", LIMIT, || async {
        (!env.instances("linux").contains_key("linux-7-leak")).then_some(())
    })
    .await;
    eventually("the leak's stale bot is deleted from Swarming", LIMIT, || async {
        (env.bots().get("linux-7-leak").is_some_and(|b| b["deleted"] == true)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await; // more audit rounds
    let all: BTreeMap<String, String> = env.instances("");
    let state = env.state();
    let names: BTreeSet<&str> =
        state["instances"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert!(
        names.contains("foreign-1") && names.contains("linux-8-othr"),
        "instances without our label stay: {all:?} {names:?}"
    );
    assert_eq!(env.instances("linux").len(), 2, "our VM's instance and the other deployment's stay");
    env.converged("linux", 1).await;
    env.stop().await;
}

// ---- (ix) --------------------------------------------------------------------------------

/// Runs `f` twice in a row, then twice at once.
async fn four_times<F, Fut, T>(f: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, TaskError>>,
{
    f().await.unwrap();
    f().await.unwrap();
    let (a, b) = tokio::join!(f(), f());
    a.unwrap();
    b.unwrap();
}

/// Runs a handler until it is done (it asks to look again while Compute works on an operation).
async fn to_the_end<F, Fut>(f: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Next, TaskError>>,
{
    for _ in 0..200 {
        match f().await.unwrap() {
            Next::Done => return,
            Next::After(d) => tokio::time::sleep(d.min(Duration::from_millis(200))).await,
        }
    }
    panic!("the handler never finished its work");
}

async fn run_cron(ctx: &Ctx, job: &str) -> Result<(), TaskError> {
    cron::run(ctx, job).await.map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_handler_run_twice_in_a_row_and_twice_at_once_reaches_the_same_end_state() {
    let env =
        Env::start(Backend::Redis, sim_config(), &[("linux", pool("linux", 2, "1d", "10m"))], false).await;
    let ctx = &env.ctx;
    let p = || "linux".to_owned();
    four_times(|| run_cron(ctx, "import_configs")).await;
    four_times(|| tasks::expand_config::run(ctx, ExpandConfig { prefix: p() })).await;
    for id in ["linux-0", "linux-1"] {
        four_times(|| tasks::create_vm::run(ctx, CreateVm { id: id.into() })).await;
    }
    let hosts: BTreeMap<String, String> =
        env.vms("linux").await.into_iter().map(|v| (v.id, v.hostname)).collect();
    assert_eq!(hosts.len(), 2);
    for id in ["linux-0", "linux-1"] {
        four_times(|| tasks::create_instance::run(ctx, CreateInstance { id: id.into() })).await;
        to_the_end(|| tasks::create_instance::run(ctx, CreateInstance { id: id.into() })).await;
    }
    let inserts = env.inserts();
    assert_eq!(inserts.len(), 2, "one instance per VM: {inserts:?}");
    assert!(inserts.values().all(|ids| ids.len() == 1), "one requestId per hostname: {inserts:?}");
    eventually("both bots connect", LIMIT, || async {
        let bots = env.bots();
        hosts.values().all(|h| bots.get(h).is_some_and(|b| b.get("isDead").is_none())).then_some(())
    })
    .await;
    for id in ["linux-0", "linux-1"] {
        four_times(|| tasks::manage_bot::run(ctx, ManageBot { id: id.into() })).await;
    }
    four_times(|| tasks::count_vms::run(ctx, CountVms { prefix: p() })).await;
    four_times(|| {
        tasks::inspect_swarming::run(ctx, InspectSwarming { server: "https://swarm.example.com".into() })
    })
    .await;
    four_times(|| {
        tasks::audit_instances::run(
            ctx,
            AuditInstances { project: "my-proj".into(), zone: "us-central1-b".into() },
        )
    })
    .await;
    let c = env.counts("linux").await;
    assert_eq!((c.configured, c.created, c.connected), (2, 2, 2));
    assert_eq!(env.instances("linux").len(), 2, "the audit deleted nothing of ours");

    // Shrink to one: drain, terminate, destroy, delete, each four times.
    env.write_pool("linux", &pool("linux", 1, "1d", "10m"));
    four_times(|| run_cron(ctx, "import_configs")).await;
    four_times(|| tasks::expand_config::run(ctx, ExpandConfig { prefix: p() })).await;
    // The one let go is the one idle longest (idle first); the other stays untouched.
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    let (g, k) = if rec.wants(0) { ("linux-1", "linux-0") } else { ("linux-0", "linux-1") };
    assert!(!rec.wants(1) || !rec.wants(0), "one of the two is let go");
    let gone = ctx.ports.store.vm(g).await.unwrap().unwrap().value;
    four_times(|| tasks::drain_vm::run(ctx, DrainVm { id: g.into() })).await;
    four_times(|| tasks::drain_vm::run(ctx, DrainVm { id: k.into() })).await;
    assert!(ctx.ports.store.vm(g).await.unwrap().unwrap().value.drained);
    assert!(!ctx.ports.store.vm(k).await.unwrap().unwrap().value.drained);
    let terminate =
        || tasks::terminate_bot::run(ctx, TerminateBot { id: g.into(), hostname: gone.hostname.clone() });
    four_times(terminate).await;
    eventually("the drained bot is terminated", LIMIT, || async {
        env.bots()[&gone.hostname]["terminationTaskId"].is_string().then_some(())
    })
    .await;
    four_times(|| tasks::manage_bot::run(ctx, ManageBot { id: g.into() })).await;
    four_times(|| tasks::destroy_instance::run(ctx, DestroyInstance::of(&gone).unwrap())).await;
    to_the_end(|| tasks::destroy_instance::run(ctx, DestroyInstance::of(&gone).unwrap())).await;
    four_times(|| tasks::delete_bot::run(ctx, DeleteBot { id: g.into(), hostname: gone.hostname.clone() }))
        .await;
    // A late task for the old incarnation does nothing.
    four_times(|| {
        tasks::destroy_instance::run(
            ctx,
            DestroyInstance { id: k.into(), ..DestroyInstance::of(&gone).unwrap() },
        )
    })
    .await;

    let left = env.vms("linux").await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].hostname, hosts[k], "the remaining VM is untouched");
    let state = env.state();
    let deletes: BTreeSet<&str> = state["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["type"] == "delete")
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(deletes.len(), 1, "one delete operation (same requestId every time): {deletes:?}");
    eventually("only the kept VM's instance is left", LIMIT, || async {
        let inst = env.instances("linux");
        (inst.len() == 1 && inst.contains_key(&hosts[k])).then_some(())
    })
    .await;
    assert_eq!(env.bots()[&gone.hostname]["deleted"], true);
    env.stop().await;
}

// ---- (x) ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_redis_converge_without_two_inserts_for_one_hostname() {
    let timing = "[timing]\nwatch = \"1s\"\nbot_grace = \"3s\"\nobservation_ttl = \"2s\"\nbackoff_base = \"1s\"\nbackoff_cap = \"2s\"\n";
    let env = Procs::start(8, timing).await;
    std::fs::write(env.configs.join("linux.yaml"), pool("linux", 4, "1d", "10m")).unwrap();
    let (a, b) = (env.spawn(), env.spawn());
    let (ctx, sim) = (env.ctx().await, env.sim.clone());
    eventually("two processes converge to 4", LIMIT, || async {
        let c =
            gce_backend_jobs::records::counts::tally(&*ctx.ports.store, "linux", ctx.now()).await.unwrap().0;
        (c.configured == 4 && c.created == 4 && c.connected == 4).then_some(())
    })
    .await;
    let state = sim.with(|w| gce_backend::sim::admin::state_json(w));
    let inserts = state["inserts"].as_array().unwrap();
    assert_eq!(inserts.len(), 4, "one hostname per VM: {inserts:?}");
    for i in inserts {
        let ids: BTreeSet<&str> =
            i["requestIds"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
        assert_eq!(ids.len(), 1, "never two inserts with different requestIds for {}", i["name"]);
    }
    assert_eq!(state["instances"].as_array().unwrap().len(), 4);
    env.stop(&mut [a, b]);
}

// ---- cron ticks and the ListBots walk ----------------------------------------------------

/// The simulator's call counts, by method and status.
async fn all_calls(env: &Env) -> serde_json::Value {
    reqwest::get(format!("{}/sim/calls", env.sim_url)).await.unwrap().json().await.unwrap()
}

/// Calls of `method`, whatever their status.
async fn sim_calls(env: &Env, method: &str) -> u64 {
    let calls = all_calls(env).await;
    calls["calls"][method].as_object().map_or(0, |m| m.values().filter_map(|v| v.as_u64()).sum())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_tick_runs_once_across_processes_sharing_a_redis() {
    let env =
        Env::start(Backend::Redis, sim_config(), &[("linux", pool("linux", 1, "1d", "10m"))], false).await;
    run_cron(&env.ctx, "import_configs").await.unwrap();
    // A second service context on the same Redis and simulator, as another process would have.
    let opts = RunOptions {
        store: gce_backend::server::RedisArgs {
            redis: env._redis.as_ref().map(RedisServer::url),
            namespace: DEPLOYMENT.into(),
        },
        role: Role::Workers,
        configs: env.dir.clone(),
        settings: Default::default(),
        gce_endpoint: Some(env.sim_url.clone()),
        swarming_endpoint: None,
        real_gce: false,
        google_credentials: None,
        certs_url: None,
        quiet: true,
        api: Default::default(),
    };
    let (other, _) = server::context(&opts, &settings()).await.unwrap();
    // Both fire the same tick of audit_instances, whose fan-out lists the project's zones once
    // (the import listed them once already, to check the Config's zone).
    let before = sim_calls(&env, "compute.zones.list").await;
    tokio::join!(
        gce_backend::server::scheduler::tick(&env.ctx, "audit_instances", 60),
        gce_backend::server::scheduler::tick(&other, "audit_instances", 60),
    );
    assert_eq!(sim_calls(&env, "compute.zones.list").await, before + 1, "one run for the tick");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manage_bot_reads_the_listbots_walk_instead_of_one_getbot_per_vm() {
    let env =
        Env::start(Backend::Redis, sim_config(), &[("linux", pool("linux", 3, "1d", "10m"))], false).await;
    let ctx = &env.ctx;
    run_cron(ctx, "import_configs").await.unwrap();
    tasks::expand_config::run(ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    for n in 0..3 {
        let id = format!("linux-{n}");
        tasks::create_vm::run(ctx, CreateVm { id: id.clone() }).await.unwrap();
        to_the_end(|| tasks::create_instance::run(ctx, CreateInstance { id: id.clone() })).await;
    }
    let hosts: Vec<String> = env.vms("linux").await.into_iter().map(|v| v.hostname).collect();
    assert_eq!(hosts.len(), 3);
    eventually("three bots connect", LIMIT, || async {
        let bots = env.bots();
        hosts.iter().all(|h| bots.contains_key(h)).then_some(())
    })
    .await;
    tasks::inspect_swarming::run(ctx, InspectSwarming { server: "https://swarm.example.com".into() })
        .await
        .unwrap();
    assert_eq!(sim_calls(&env, "swarming.ListBots").await, 1, "one walk");
    let before = sim_calls(&env, "swarming.GetBot").await;
    for n in 0..3 {
        tasks::manage_bot::run(ctx, ManageBot { id: format!("linux-{n}") }).await.unwrap();
    }
    assert_eq!(sim_calls(&env, "swarming.GetBot").await, before, "no GetBot for bots the walk returned");
    assert_eq!(env.counts("linux").await.connected, 3);
    env.stop().await;
}
