//! Bulk creation on Redis and the simulator: a 2 000-VM pool made by two processes under Compute
//! Engine's default API quotas with the shipped rate limits (Compute never answers
//! `rateLimitExceeded`), and a worker killed with SIGKILL while its bulk runs (nothing lost,
//! nothing made twice).

use std::collections::BTreeSet;
use std::time::Duration;

use gce_backend::sim::SimConfig;
use gce_backend::sim::quota::RateQuota;
use gce_backend_queues::testing::eventually;

use crate::support::{Procs, pool, sim_config};

/// The shipped settings' `[name]` section, as written in `config/service.toml`.
fn shipped(name: &str) -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/service.toml")).unwrap();
    let head = format!("[{name}]\n");
    let start = text.find(&head).unwrap_or_else(|| panic!("no [{name}] in the shipped settings"));
    let body = &text[start + head.len()..];
    let end = body.find("\n[").map_or(body.len(), |i| i + 1);
    format!("{head}{}", &body[..end])
}

/// Calls the simulator answered with each status, for `method`.
fn calls(env: &Procs, method: &str) -> u64 {
    env.sim.with(|w| w.calls.get(method).map_or(0, |by| by.values().sum()))
}

/// Instance names the simulator holds whose name starts with `prefix-`.
fn instances(env: &Procs, prefix: &str) -> BTreeSet<String> {
    let of = format!("{prefix}-");
    env.sim.with(|w| w.instances.keys().filter(|k| k.2.starts_with(&of)).map(|k| k.2.clone()).collect())
}

/// Waits until every VM of `prefix` has its instance recorded; returns the VMs' hostnames.
async fn all_created(env: &Procs, prefix: &str, n: u32, limit: Duration) -> BTreeSet<String> {
    let ctx = env.ctx().await;
    eventually(&format!("{n} VMs of {prefix} have their instance"), limit, || async {
        let c =
            gce_backend_jobs::records::counts::tally(&*ctx.ports.store, prefix, ctx.now()).await.unwrap().0;
        (c.created == n && c.vms == n).then_some(())
    })
    .await;
    let ids = ctx
        .ports
        .store
        .vm_ids(gce_backend_jobs::ports::store::VmIndex::OfConfig(prefix.into()))
        .await
        .unwrap();
    let mut names = BTreeSet::new();
    for id in ids {
        let vm = ctx.ports.store.vm(&id).await.unwrap().unwrap().value;
        assert!(vm.instance.is_some(), "{id} recorded");
        names.insert(vm.hostname);
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2000_vm_pool_arrives_under_the_default_quotas_without_one_rate_limit_exceeded() {
    let toml = format!("{}{}", shipped("limits"), shipped("rate_limits"));
    assert!(toml.contains("bulk = {"), "the shipped settings limit bulk inserts:\n{toml}");
    let quota = SimConfig { quota: RateQuota::gce_default(), ..sim_config() };
    let env = Procs::start_with(32, &toml, quota).await;
    const N: u32 = 2000;
    std::fs::write(env.configs.join("big.yaml"), pool("big", N, "1d", "10m")).unwrap();
    let (a, b) = (env.spawn(), env.spawn());
    let names = all_created(&env, "big", N, Duration::from_secs(240)).await;
    assert_eq!(names.len(), N as usize);
    assert_eq!(instances(&env, "big"), names, "one instance per VM, named as its VM");
    let summary = env.sim.with(|w| gce_backend::sim::summary::Summary::of(w).json());
    assert_eq!(
        summary["rateLimited"]["total"], 0,
        "Compute refused calls for rate: {}",
        summary["rateLimited"]
    );
    assert!(summary["apiRequests"]["total"].as_u64().is_some_and(|n| n > 0), "{}", summary["apiRequests"]);
    let (bulks, inserts) =
        (calls(&env, "compute.instances.bulkInsert"), calls(&env, "compute.instances.insert"));
    assert!(bulks >= 2, "{bulks} bulk inserts");
    assert!(bulks + inserts < u64::from(N) / 10, "{bulks} bulk inserts and {inserts} inserts for {N} VMs");
    println!("bulk: vms={N} bulk_inserts={bulks} inserts={inserts}");
    env.stop(&mut [a, b]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_while_its_bulk_runs_loses_and_duplicates_nothing() {
    // Operations take 3 s: the first bulk is still running when its process dies.
    let slow = SimConfig { op_ms: 3000, ..sim_config() };
    let env = Procs::start_with(16, "[timing]\nbulk_gather = \"1s\"\n", slow).await;
    const N: u32 = 300;
    std::fs::write(env.configs.join("kill.yaml"), pool("kill", N, "1d", "10m")).unwrap();
    let mut first = env.spawn();
    eventually("a bulk insert is sent", Duration::from_secs(60), || async {
        (calls(&env, "compute.instances.bulkInsert") > 0).then_some(())
    })
    .await;
    first.kill().unwrap(); // SIGKILL: no shutdown, no acks
    first.wait().unwrap();
    let made_before = instances(&env, "kill").len();
    assert!(made_before > 0, "the bulk made instances before the process died");
    let second = env.spawn();
    let names = all_created(&env, "kill", N, Duration::from_secs(120)).await;
    assert_eq!(instances(&env, "kill"), names, "no instance lost, none made twice, none leaked");
    let deletes = calls(&env, "compute.instances.delete");
    assert_eq!(deletes, 0, "nothing had to be cleaned up");
    println!(
        "bulk-kill: vms={N} made_before_kill={made_before} bulk_inserts={}",
        calls(&env, "compute.instances.bulkInsert")
    );
    env.stop(&mut [second]);
}
