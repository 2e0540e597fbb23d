//! A tenant's budget on a demand-driven pool, end to end with `gce-backend run` processes on
//! Redis and the simulator: a burst grows the pool only to what the tenant's `max_cost_per_hour`
//! pays for, no task is cut, and once the settings raise the limit (the service restarted with
//! them) the pool grows to serve the rest.

use std::time::Duration;

use serde_json::{Value, json};

use gce_backend_jobs::Ctx;
use gce_backend_queues::testing::eventually;

use crate::support::{Procs, pool, terminate};

const LIMIT: Duration = Duration::from_secs(120);

/// A tenant `*` that may use anything, at most `max` dollars an hour.
fn tenant(max: f64) -> String {
    format!(
        "[tenants.\"*\"]\nprefixes = [\"*\"]\nprojects = [\"*\"]\nservice_accounts = [\"*\"]\nmachines = [\"*\"]\nmax_cost_per_hour = {max}\n"
    )
}

/// What one VM of `pool` costs an hour at the simulator's prices (e2-standard-2 and 10 GiB of
/// pd-ssd in us-central1).
fn per_vm() -> f64 {
    let rates = gce_backend_jobs::prices::book::PriceBook::snapshot().unwrap().rates();
    rates.machine_per_hour("e2-standard-2", "us-central1", false).unwrap()
        + rates.disk_per_hour("pd-ssd", 10.0, "us-central1").unwrap()
}

async fn post(env: &Procs, path: &str, body: Value) {
    let url = format!("http://{}{path}", env.addr);
    let r = reqwest::Client::new().post(url).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
}

async fn tasks(env: &Procs) -> Vec<Value> {
    let all: Value =
        reqwest::get(format!("http://{}/sim/tasks", env.addr)).await.unwrap().json().await.unwrap();
    all["tasks"].as_array().unwrap().clone()
}

async fn vms(ctx: &Ctx) -> u32 {
    gce_backend_jobs::records::counts::tally(&*ctx.ports.store, "bx", ctx.now()).await.unwrap().0.vms
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_held_at_the_tenants_limit_cuts_no_task_and_grows_when_the_limit_rises() {
    let settings = |max: f64| format!("{}\n{}", "[timing]\nwatch = \"1s\"\n", tenant(max));
    let env = Procs::start(8, &settings(per_vm() * 2.5)).await;
    let yaml = pool("bx", 0, "1d", "10m").replace("amount: {min: 0, max: 0}", "amount: {min: 0, max: 8}");
    let yaml = format!("{yaml}demand: {{dimensions: {{pool: bx}}, min_idle: 0, idle_timeout: 30s}}\n");
    std::fs::write(env.configs.join("bx.yaml"), yaml).unwrap();
    let groups = json!({"groups": [{"prefix": "bx-", "dimensions": {"pool": ["bx"]}}]});
    post(&env, "/sim/bot_groups", groups).await;
    let mut run = env.spawn();
    let ctx = env.ctx().await;
    // Eight tasks of 4 s: the demand is eight VMs; the limit pays for two.
    let one = json!({"dimensions": {"pool": "bx"}, "duration_ms": 4000});
    post(&env, "/sim/tasks", json!({"tasks": vec![one; 8]})).await;
    eventually("growth is held at two VMs, said on status", LIMIT, || async {
        let errors = ctx.ports.store.errors("bx").await.unwrap();
        let held = errors.iter().any(|e| e.stage == "budget" && e.resolved.is_none());
        (held && vms(&ctx).await == 2).then_some(())
    })
    .await;
    eventually("the held pool serves tasks", LIMIT, || async {
        tasks(&env).await.iter().any(|t| t["state"] == "COMPLETED").then_some(())
    })
    .await;
    assert_eq!(vms(&ctx).await, 2, "still two: the tenant's cost is at its limit");
    // The limit rises (the settings changed, the service restarted): the pool grows.
    let text = std::fs::read_to_string(&env.settings).unwrap();
    let raised = text.replace(&tenant(per_vm() * 2.5), &tenant(per_vm() * 20.0));
    assert_ne!(raised, text);
    std::fs::write(&env.settings, raised).unwrap();
    terminate(run.id());
    assert!(run.wait().unwrap().success());
    let run = env.spawn();
    eventually("the pool grows past two", LIMIT, || async { (vms(&ctx).await > 2).then_some(()) }).await;
    eventually("every task ends", LIMIT, || async {
        let t = tasks(&env).await;
        t.iter().all(|t| t["state"] != "PENDING" && t["state"] != "RUNNING").then_some(t)
    })
    .await;
    let t = tasks(&env).await;
    assert_eq!(t.len(), 8);
    assert!(t.iter().all(|t| t["state"] == "COMPLETED"), "no task cut short: {t:?}");
    let history = ctx.ports.store.audit(gce_backend_jobs::model::GLOBAL_AUDIT, 0, 50).await.unwrap();
    let budget: Vec<&str> = history
        .iter()
        .filter(|e| e.action == gce_backend_jobs::model::AuditAction::Budget)
        .map(|e| e.detail.as_str())
        .collect();
    assert_eq!(budget.len(), 2, "the first limit and the raise, each once: {budget:?}");
    env.stop(&mut [run]);
}
