//! Spot pools on Redis and the simulator: preempting 30 % of a Spot pool is a normal
//! replacement (bots deleted, VMs replaced), counted, and never a zone backoff; a pool with
//! `spot_failover` preempted too often makes standard VMs until its cooldown ends.

use serde_json::json;

use crate::support::{Backend, Env, pool, sim_config};
use gce_backend_jobs::model::Vm;
use gce_backend_queues::testing::eventually;
use std::time::Duration;

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
    assert!(
        env.ctx.ports.store.backoff("my-proj", "us-central1-b").await.unwrap().is_none(),
        "no zone backoff"
    );
    let text = env.ctx.metrics.text();
    let counted: f64 = text
        .lines()
        .filter(|l| l.contains("op=\"preempted\"") && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(counted, 3.0, "{text}");
    env.stop().await;
}

/// Asks the simulator to preempt `vm`'s instance.
async fn preempt(env: &Env, vm: &Vm) {
    let body = json!({"project": "my-proj", "zone": vm.zone(), "name": vm.hostname});
    let r =
        reqwest::Client::new().post(format!("{}/sim/preempt", env.sim_url)).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

/// The value of the `/metrics` line that starts with `series` (name and labels), if any.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_pool_preempted_too_often_makes_standard_vms_until_its_cooldown_ends() {
    let yaml = pool("flip", 4, "1d", "10m").replace(
        "  label: {team: e2e}\n",
        "  label: {team: e2e}\n  provisioning_model: SPOT\n  instance_termination_action: STOP\n",
    ) + "spot_failover: {more_than: 1, within: 10m, cooldown: 1h}\n";
    let env = Env::start(Backend::Redis, sim_config(), &[("flip", yaml)], true).await;
    env.converged("flip", 4).await;
    let first = env.vms("flip").await;
    assert!(first.iter().all(|v| !v.failover && v.attributes.preemptible()), "Spot VMs");
    // Two preemptions: more than 1 within 10 minutes.
    for vm in first.iter().take(2) {
        preempt(&env, vm).await;
    }
    let gone: Vec<String> = first.iter().take(2).map(|v| v.hostname.clone()).collect();
    let standard =
        eventually("the preempted VMs replaced by standard ones", Duration::from_secs(180), || async {
            let vms = env.vms("flip").await;
            let made: Vec<Vm> = vms.iter().filter(|v| v.failover).cloned().collect();
            let c = env.counts("flip").await;
            (made.len() == 2 && gone.iter().all(|h| vms.iter().all(|v| &v.hostname != h)) && c.connected == 4)
                .then_some(made)
        })
        .await;
    let spot_of = |h: &str| env.sim.with(|w| w.instances.iter().find(|(k, _)| k.2 == h).map(|(_, i)| i.spot));
    for v in &standard {
        assert_eq!(spot_of(&v.hostname), Some(false), "{}: Compute made a standard instance", v.hostname);
        assert_eq!(v.attributes.provisioning_model, "STANDARD");
    }
    let sp = env.status("flip", true).await.spot.expect("status shows it");
    let f = sp.failover.clone().expect("failed over");
    assert_eq!((f.preempted, sp.preempted_total, sp.failovers_total), (2, 2, 1));
    // The API's status and /metrics say so.
    let api = env.api_url.clone().expect("the API");
    let http = reqwest::Client::new();
    let entry: serde_json::Value = http
        .get(format!("{api}/api/gce-backend/v1/configs/flip"))
        .bearer_auth(crate::api::ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(entry["status"]["spot"]["failover"]["preempted"], 2, "{entry}");
    let text = http.get(format!("{api}/metrics")).bearer_auth(crate::api::METRICS).send().await.unwrap();
    let text = text.text().await.unwrap();
    assert_eq!(sample(&text, "gce_backend_spot_failover_active{config=\"flip\"}"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "gce_backend_spot_failovers_total{config=\"flip\"}"), Some(1.0));
    assert_eq!(sample(&text, "gce_backend_spot_events_total{config=\"flip\",kind=\"preempted\"}"), Some(2.0));
    // The cooldown ends (moved to now: the service's clock is the wall clock): the failover is
    // over at the next look, and a VM preempted now is made Spot again (one preemption is not
    // more than 1); the standard VMs stay.
    gce_backend_jobs::records::writes::update_config(&env.ctx, "flip", |r| {
        if let Some(f) = r.spot.failover.as_mut() {
            f.until = env.ctx.now();
        }
        Ok::<_, gce_backend_jobs::TaskError>(true)
    })
    .await
    .unwrap();
    eventually("the failover over", Duration::from_secs(30), || async {
        let rec = env.ctx.ports.store.config("flip").await.unwrap().unwrap().value;
        rec.spot.failover.is_none().then_some(())
    })
    .await;
    let spot_vm = env.vms("flip").await.into_iter().find(|v| !v.failover).expect("a Spot VM left");
    preempt(&env, &spot_vm).await;
    let again = eventually("the preempted Spot VM replaced", Duration::from_secs(60), || async {
        let vms = env.vms("flip").await;
        let c = env.counts("flip").await;
        let new = vms.iter().find(|v| v.index == spot_vm.index && v.hostname != spot_vm.hostname).cloned();
        new.filter(|v| v.instance.is_some() && c.connected == 4)
    })
    .await;
    assert!(!again.failover && spot_of(&again.hostname) == Some(true), "Spot again");
    let vms = env.vms("flip").await;
    for v in &standard {
        let now = vms.iter().find(|n| n.id == v.id).expect("kept");
        assert!(now.hostname == v.hostname && !now.drained, "{}: kept until its lifetime ends", v.id);
    }
    let sp = env.status("flip", true).await.spot.unwrap();
    assert_eq!((sp.failover, sp.preempted_total, sp.failovers_total), (None, 3, 1));
    assert!(
        env.ctx.ports.store.backoff("my-proj", "us-central1-b").await.unwrap().is_none(),
        "no zone backoff"
    );
    env.stop().await;
}
