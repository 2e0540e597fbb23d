//! Demand-driven pools and warm pools end to end on Redis and the simulator: a burst of tasks
//! scales a pool up, the quiet after it scales it down to `min_idle` without cutting a task
//! short, a VM kept warm is resumed and its bot serves the next task, and Swarming down holds the
//! fleet.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Backend, Env, pool, sim_config};
use gce_backend_queues::testing::eventually;

const LIMIT: Duration = Duration::from_secs(90);

/// A demand-driven Config `prefix` (up to `max` VMs, serving Swarming pool `prefix`), plus `extra`
/// lines (a warm pool).
fn demand_pool(prefix: &str, max: u32, min_idle: u32, extra: &str) -> String {
    let yaml = pool(prefix, 0, "1d", "10m")
        .replace("amount: {min: 0, max: 0}", &format!("amount: {{min: 0, max: {max}}}"));
    format!(
        "{yaml}demand: {{dimensions: {{pool: {prefix}}}, min_idle: {min_idle}, idle_timeout: 2s}}\n{extra}"
    )
}

async fn post(env: &Env, path: &str, body: Value) -> Value {
    let r = reqwest::Client::new().post(format!("{}{path}", env.sim_url)).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    r.json().await.unwrap()
}

/// The simulator's tasks of Swarming pool `pool`.
async fn tasks(env: &Env, pool: &str) -> Vec<Value> {
    let all: Value = reqwest::get(format!("{}/sim/tasks", env.sim_url)).await.unwrap().json().await.unwrap();
    all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["dimensions"]["pool"].to_string().contains(pool))
        .cloned()
        .collect()
}

/// Starts the service with Config `prefix` and the simulator's bots of hostnames `prefix-…` in
/// Swarming pool `prefix`.
async fn start(prefix: &str, yaml: String) -> Env {
    let env = Env::start(Backend::Redis, sim_config(), &[(prefix, yaml)], true).await;
    let groups = json!({"groups": [{"prefix": format!("{prefix}-"), "dimensions": {"pool": [prefix]}}]});
    post(&env, "/sim/bot_groups", groups).await;
    env
}

/// The value of the series of `family` whose labels include every one of `labels`, scraped from
/// the API's `/metrics`.
async fn metric(env: &Env, family: &str, labels: &[&str]) -> Option<f64> {
    let api = env.api_url.clone().expect("the API");
    let r =
        reqwest::Client::new().get(format!("{api}/metrics")).bearer_auth(crate::api::METRICS).send().await;
    let text = r.unwrap().text().await.unwrap();
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) && labels.iter().all(|w| l.contains(w)))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The `read_demand` cron runs of this process so far.
fn read_demand_ticks(env: &Env) -> f64 {
    let text = env.ctx.metrics.text();
    text.lines()
        .filter(|l| {
            l.contains("cron_runs_total{") && l.contains("job=\"read_demand\"") && l.contains("result=\"ok\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `n` tasks of `ms` for Swarming pool `pool`.
async fn submit(env: &Env, pool: &str, n: usize, ms: u64) {
    let one = json!({"dimensions": {"pool": pool}, "duration_ms": ms});
    post(env, "/sim/tasks", json!({"tasks": vec![one; n]})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_scales_up_and_the_quiet_scales_down_to_min_idle_without_cutting_a_task() {
    let env = start("ci", demand_pool("ci", 10, 1, "")).await;
    env.converged("ci", 1).await;
    submit(&env, "ci", 6, 3000).await;
    eventually("the burst scales the pool up", LIMIT, || async {
        (env.counts("ci").await.connected >= 5).then_some(())
    })
    .await;
    eventually("every task ends", LIMIT, || async {
        let t = tasks(&env, "ci").await;
        t.iter().all(|t| t["state"] != "PENDING" && t["state"] != "RUNNING").then_some(())
    })
    .await;
    // Idle past the timeout: back to min_idle, each bot after its task.
    env.converged("ci", 1).await;
    let t = tasks(&env, "ci").await;
    assert_eq!(t.len(), 6);
    assert!(t.iter().all(|t| t["state"] == "COMPLETED"), "no task cut short: {t:?}");
    let st = env.status("ci", true).await;
    let d = st.demand.expect("a reading");
    assert_eq!((d.pending, d.busy, d.target), (0, 0, 1), "{}", d.why);
    assert!(d.why.contains("min_idle 1"), "{}", d.why);
    let target = metric(&env, "gce_backend_demand_tasks", &["config=\"ci\"", "what=\"target\""]).await;
    assert_eq!(target, Some(1.0));
    let held = metric(&env, "gce_backend_demand_held", &["config=\"ci\""]).await;
    assert_eq!(held, Some(0.0));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_pool_is_filled_at_rest_lent_to_a_burst_by_resumes_and_parked_again() {
    let env = start("wp", demand_pool("wp", 4, 0, "warm: {suspended: 2}\n")).await;
    // No work yet (min_idle 0): two VMs are made for the warm pool and suspended once their bots
    // have connected.
    eventually("the warm pool is filled", LIMIT, || async {
        let i = env.instances("wp");
        (i.len() == 2 && i.values().all(|s| s == "SUSPENDED") && env.counts("wp").await.parked == 2)
            .then_some(())
    })
    .await;
    let warm: Vec<String> = env.instances("wp").into_keys().collect();
    let shown = metric(&env, "gce_backend_fleet_vms", &["config=\"wp\"", "state=\"warm\""]).await;
    assert_eq!(shown, Some(2.0), "/metrics counts them");
    let inserted = env.inserts().len();
    assert_eq!(inserted, 2);
    // A burst of two: both are resumed and serve it; nothing is made.
    submit(&env, "wp", 2, 1000).await;
    eventually("the warm VMs serve the burst", LIMIT, || async {
        let t = tasks(&env, "wp").await;
        t.iter().filter(|t| t["state"] == "COMPLETED").count().eq(&2).then_some(())
    })
    .await;
    for t in tasks(&env, "wp").await {
        assert!(warm.iter().any(|h| t["bot"]["id"] == h.as_str()), "served by a resumed VM: {t}");
    }
    let summary: Value =
        reqwest::get(format!("{}/sim/summary", env.sim_url)).await.unwrap().json().await.unwrap();
    assert!(summary["actions"]["resume"].as_u64() >= Some(2), "{summary}");
    // The quiet: both go back to the warm pool; none is deleted, none made.
    eventually("both are suspended again", LIMIT, || async {
        let i = env.instances("wp");
        (i.len() == 2 && i.values().all(|s| s == "SUSPENDED") && env.counts("wp").await.parked == 2)
            .then_some(())
    })
    .await;
    let mut now: Vec<String> = env.instances("wp").into_keys().collect();
    now.sort();
    let mut before = warm.clone();
    before.sort();
    assert_eq!(now, before, "the same two VMs");
    assert_eq!(env.inserts().len(), inserted, "no new instance made");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swarming_down_holds_the_fleet() {
    let env = start("hd", demand_pool("hd", 6, 0, "")).await;
    submit(&env, "hd", 3, 1500).await;
    eventually("three VMs serve the burst", LIMIT, || async {
        (env.counts("hd").await.connected == 3).then_some(())
    })
    .await;
    env.faults(json!({"errors": {"swarming.CountTasks": {"rate": 1.0, "status": 503}}})).await;
    eventually("the target is held", LIMIT, || async {
        env.status("hd", true).await.demand.filter(|d| d.held.is_some()).map(drop)
    })
    .await;
    // The tasks end and the bots idle past the timeout: nothing shrinks while it is held.
    eventually("every task ends", LIMIT, || async {
        tasks(&env, "hd").await.iter().all(|t| t["state"] == "COMPLETED").then_some(())
    })
    .await;
    let held = env.status("hd", true).await;
    // Four more readings (a cron tick a second), well past the 2 s idle timeout: nothing shrinks.
    let from = read_demand_ticks(&env);
    eventually("four more readings", LIMIT, || async {
        (read_demand_ticks(&env) >= from + 4.0).then_some(())
    })
    .await;
    let c = env.counts("hd").await;
    assert_eq!((c.vms, c.draining), (3, 0), "held: {:?}", held.demand);
    let errors = env.status("hd", true).await.errors;
    assert!(errors.iter().any(|e| e.code == "demand_unread" && e.resolved.is_none()), "{errors:?}");
    // Swarming answers again: the idle pool shrinks to nothing.
    env.faults(json!({"errors": {}})).await;
    env.converged("hd", 0).await;
    env.stop().await;
}
