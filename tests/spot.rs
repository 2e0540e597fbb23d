//! Spot pools on Redis and the simulator: preempting 30 % of a Spot pool is a normal
//! replacement (bots deleted, VMs replaced), counted, and never a zone backoff.

use serde_json::json;

use crate::support::{Backend, Env, pool, sim_config};
use gce_backend_queues::testing::eventually;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempting_a_third_of_a_spot_pool_converges_with_no_zone_backoff() {
    let yaml = pool("spot", 10, "1d", "10m").replace(
        "  label: {team: e2e}\n",
        "  label: {team: e2e}\n  provisioning_model: SPOT\n  instance_termination_action: STOP\n",
    );
    let env = Env::start(Backend::Redis, sim_config(), &[("spot", yaml)], true).await;
    env.converged("spot", 10).await;
    let first: Vec<_> = env.vms("spot").await;
    assert!(env.sim.with(|w| w.instances.values().all(|i| i.spot)), "inserted as Spot instances");
    // Compute preempts three of them.
    for vm in first.iter().take(3) {
        let body = json!({"project": "my-proj", "zone": vm.zone(), "name": vm.hostname});
        let r = reqwest::Client::new()
            .post(format!("{}/sim/preempt", env.sim_url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let preempted: Vec<String> = first.iter().take(3).map(|v| v.hostname.clone()).collect();
    eventually("the preempted VMs are replaced", std::time::Duration::from_secs(60), || async {
        let now: Vec<String> = env.vms("spot").await.into_iter().map(|v| v.hostname).collect();
        let c = env.counts("spot").await;
        (preempted.iter().all(|h| !now.contains(h)) && c.connected == 10 && c.draining == 0).then_some(())
    })
    .await;
    env.converged("spot", 10).await;
    let bots = env.bots();
    for h in &preempted {
        assert_eq!(bots[h]["deleted"], true, "{h}'s bot deleted");
    }
    assert!(env.ctx.store.backoff("my-proj", "us-central1-b").await.unwrap().is_none(), "no zone backoff");
    let text = env.ctx.metrics.text();
    let counted: f64 = text
        .lines()
        .filter(|l| l.contains("op=\"preempted\"") && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(counted, 3.0, "{text}");
    env.stop().await;
}
