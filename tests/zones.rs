//! Multi-zone Configs on Redis and the simulator: VMs spread over the zones by weight, a stockout
//! in one zone moves creation to the others at once (not after its backoff), and new VMs go to
//! the zone with the most headroom; a regional Config spreads over its region's zones.

use std::collections::BTreeMap;

use serde_json::json;

use crate::support::{Backend, Env, settings, sim_config};
use gce_backend_jobs::config::Secs;

/// A pool of `amount` VMs over us-central1-a (weight `wa`) and us-central1-b (weight `wb`).
pub(crate) fn spread(prefix: &str, amount: u32, wa: u32, wb: u32) -> String {
    format!(
        r#"prefix: {prefix}
amount: {{min: {amount}, max: {amount}}}
zones: [{{zone: us-central1-a, weight: {wa}}}, {{zone: us-central1-b, weight: {wb}}}]
attributes:
  project: my-proj
  machine_type: "zones/{{{{.Zone}}}}/machineTypes/e2-standard-2"
  disk: [{{image: projects/debian-cloud/global/images/debian-12, size: 10, type: "zones/{{{{.Zone}}}}/diskTypes/pd-ssd"}}]
  network_interface: [{{network: global/networks/default}}]
lifetime: 1d
timeout: 10m
swarming: https://swarm.example.com
"#
    )
}

/// Instances of `prefix` by zone.
fn by_zone(env: &Env, prefix: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for i in env.state()["instances"].as_array().unwrap() {
        if i["name"].as_str().unwrap().starts_with(&format!("{prefix}-")) && i["status"] == "RUNNING" {
            *out.entry(i["zone"].as_str().unwrap().to_owned()).or_default() += 1;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vms_spread_by_weight_and_a_stockout_moves_creation_to_the_other_zone_at_once() {
    // A backoff far longer than the test may take: convergence cannot come from waiting it out.
    let mut s = settings();
    s.timing.backoff_base = Secs(600);
    s.timing.backoff_cap = Secs(600);
    let pools = [("even", spread("even", 4, 1, 1)), ("moved", spread("moved", 4, 3, 1))];
    let env = Env::start_with(Backend::Redis, sim_config(), &[], true, s).await;
    env.faults(json!({"stockout_zones": ["us-central1-a"]})).await;
    env.write_pool("moved", &pools[1].1);
    env.converged("moved", 4).await;
    let zones = by_zone(&env, "moved");
    assert_eq!(zones, BTreeMap::from([("us-central1-b".to_owned(), 4)]), "all in b");
    let st = env.status("moved", true).await;
    let backed: Vec<(&str, bool)> = st.zones.iter().map(|z| (z.zone.as_str(), z.backoff.is_some())).collect();
    assert_eq!(backed, [("us-central1-a", true), ("us-central1-b", false)], "status per zone");
    for vm in env.vms("moved").await {
        assert_eq!(vm.zone(), "us-central1-b", "{}", vm.id);
    }

    // With capacity everywhere, a pool fills its zones by weight. (Zone a's backoff is the
    // project's: lifted here, as its end would.)
    env.faults(json!({"stockout_zones": []})).await;
    env.ctx.ports.store.set_backoff("my-proj", "us-central1-a", None).await.unwrap();
    env.write_pool("even", &pools[0].1);
    env.converged("even", 4).await;
    let zones = by_zone(&env, "even");
    assert_eq!(zones, BTreeMap::from([("us-central1-a".to_owned(), 2), ("us-central1-b".to_owned(), 2)]));

    // New VMs go where the headroom is: "moved" (3:1, all 4 in b) grows to 8, and zone a, with
    // room for 6, gets all 4 new ones (b already holds more than its share of 2).
    env.write_pool("moved", &spread("moved", 8, 3, 1));
    env.converged("moved", 8).await;
    let zones = by_zone(&env, "moved");
    assert_eq!(zones, BTreeMap::from([("us-central1-a".to_owned(), 4), ("us-central1-b".to_owned(), 4)]));
    let st = env.status("moved", true).await;
    let counted: Vec<(&str, u32, u32)> =
        st.zones.iter().map(|z| (z.zone.as_str(), z.vms, z.connected)).collect();
    assert_eq!(counted, [("us-central1-a", 4, 4), ("us-central1-b", 4, 4)], "status counts per zone");
    let shared = gce_backend::metrics::Metrics::new(env.ctx.clone(), true).render().await;
    for zone in ["us-central1-a", "us-central1-b"] {
        let series =
            format!("gce_backend_zone_vms{{config=\"moved\",zone=\"{zone}\",state=\"connected\"}} 4");
        assert!(shared.lines().any(|l| l == series), "{series} in\n{shared}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regional_pool_spreads_over_the_regions_zones_and_a_stockout_moves_it_to_the_others() {
    let mut s = settings();
    s.timing.backoff_base = Secs(600);
    s.timing.backoff_cap = Secs(600);
    let env = Env::start_with(Backend::Redis, sim_config(), &[], true, s).await;
    env.faults(json!({"stockout_zones": ["us-central1-a"]})).await;
    let pool = spread("region", 6, 1, 1).replace(
        "zones: [{zone: us-central1-a, weight: 1}, {zone: us-central1-b, weight: 1}]",
        "region: us-central1",
    );
    assert!(pool.contains("region: us-central1\n"), "{pool}");
    env.write_pool("region", &pool);
    env.converged("region", 6).await;
    // The simulator's project has us-central1-a, -b and -c (and zones in other regions).
    let zones = by_zone(&env, "region");
    let placed: Vec<&str> = zones.keys().map(String::as_str).collect();
    assert_eq!(placed, ["us-central1-b", "us-central1-c"], "{zones:?}");
    assert_eq!(zones.values().sum::<usize>(), 6);
    let st = env.status("region", true).await;
    let backed: Vec<(&str, bool)> = st.zones.iter().map(|z| (z.zone.as_str(), z.backoff.is_some())).collect();
    assert_eq!(backed, [("us-central1-a", true), ("us-central1-b", false), ("us-central1-c", false)]);
    env.stop().await;
}
