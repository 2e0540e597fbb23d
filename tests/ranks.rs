//! Ranked fallbacks on Redis and the simulator: a stockout of rank 0's machine type in the zone
//! moves the pool's VMs to rank 1 at once (alone and in bulk), none lost; once the stockout is
//! lifted and rank 0's backoff has ended, a new VM is made on rank 0 again.

use std::time::Duration;

use serde_json::json;

use crate::support::{Backend, Env, pool, settings, sim_config};
use gce_backend_jobs::config::Secs;
use gce_backend_queues::testing::eventually;

/// A pool of `amount` VMs in us-central1-b: rank 0 e2-standard-2, rank 1 n2d-standard-2.
fn ranked(amount: u32) -> String {
    let fallback = "fallback_machine_types: [\"zones/{{.Zone}}/machineTypes/n2d-standard-2\"]\n";
    pool("ranked", amount, "1d", "10m") + fallback
}

/// The machine type Compute (the simulator) says instance `name` has, by name.
async fn machine_type(env: &Env, name: &str) -> String {
    let url = format!("{}/compute/v1/projects/my-proj/zones/us-central1-b/instances/{name}", env.sim_url);
    let got: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    got["machineType"].as_str().unwrap_or_default().rsplit('/').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stockout_of_rank_0_makes_every_vm_on_rank_1_and_rank_0_comes_back_after_its_backoff() {
    // A backoff of 15 s: long enough for the whole pool to be placed while rank 0 is
    // out, short enough to end within the test (its end is waited for, not cleared by hand).
    let mut s = settings();
    s.timing.backoff_base = Secs(15);
    s.timing.backoff_cap = Secs(15);
    let env = Env::start_with(Backend::Redis, sim_config(), &[], true, s).await;
    env.faults(json!({"stockouts": ["us-central1-b/e2-standard-2"]})).await;
    // 12 VMs: at least bulk_min, so the first inserts go in bulk.
    env.write_pool("ranked", &ranked(12));
    env.converged("ranked", 12).await;
    let vms = env.vms("ranked").await;
    let mut indexes: Vec<u32> = vms.iter().map(|v| v.index).collect();
    indexes.sort();
    assert_eq!(indexes, (0..12).collect::<Vec<_>>(), "no VM lost");
    for vm in &vms {
        assert_eq!(vm.rank, Some(1), "{} on rank 1", vm.id);
        assert!(vm.attributes.machine_type.ends_with("/n2d-standard-2"), "{}", vm.attributes.machine_type);
        assert_eq!(machine_type(&env, &vm.hostname).await, "n2d-standard-2", "{}", vm.hostname);
    }
    let st = env.status("ranked", true).await;
    let zone = env.ctx.ports.store.backoff("my-proj", "us-central1-b").await.unwrap();
    assert!(zone.is_none(), "the zone itself never backed off: {zone:?}");
    let said = st.backoff.as_ref().map(|b| b.zone.as_str());
    assert_eq!(said, Some("us-central1-b/e2-standard-2"), "the Config's backoff names the machine type");
    let ranks: Vec<(u32, &str, u32, u32)> =
        st.ranks.iter().map(|r| (r.rank, r.machine_type.as_str(), r.vms, r.connected)).collect();
    assert_eq!(ranks, [(0, "e2-standard-2", 0, 0), (1, "n2d-standard-2", 12, 12)], "status per rank");
    assert!(st.ranks[0].placed >= 1 && st.ranks[1].placed >= 12, "{:?}", st.ranks);
    let shared = gce_backend::metrics::Metrics::new(env.ctx.clone(), true).render().await;
    let series = "gce_backend_rank_vms{config=\"ranked\",rank=\"1\",machine_type=\"n2d-standard-2\",state=\"connected\"} 12";
    assert!(shared.lines().any(|l| l == series), "{series} in\n{shared}");
    assert!(shared.contains("gce_backend_rank_placements_total{config=\"ranked\",rank=\"0\""), "{shared}");

    // The stockout is lifted; once rank 0's backoff is over, a new VM is made on it.
    env.faults(json!({"stockouts": []})).await;
    eventually("rank 0's backoff ends", Duration::from_secs(60), || async {
        env.status("ranked", true).await.ranks[0].backoffs.is_empty().then_some(())
    })
    .await;
    env.write_pool("ranked", &ranked(13));
    env.converged("ranked", 13).await;
    let new = env.vms("ranked").await.into_iter().find(|v| v.index == 12).unwrap();
    assert_eq!(new.rank, Some(0), "the preferred rank again");
    assert_eq!(machine_type(&env, &new.hostname).await, "e2-standard-2");
    let others = env.vms("ranked").await.into_iter().filter(|v| v.index < 12 && v.rank == Some(1)).count();
    assert_eq!(others, 12, "VMs on rank 1 stay until their lifetime ends");
    env.stop().await;
}
