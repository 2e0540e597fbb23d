//! An operator's write waits for the replica behind the sentinels: answered 2xx once the replica
//! holds it, 503 (saying the change may be lost) while no replica answers, and 2xx again when
//! one is back.

use std::time::Duration;

use gce_backend_jobs::ports::store::VmIndex;
use gce_backend_queues::testing::{Sentinels, eventually};
use serde_json::json;

use crate::api::{ADMIN, Client};
use crate::support::{Backend, Env, pool, sim_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_no_replica_acknowledged_is_answered_503() {
    let mut env =
        Env::start(Backend::Sentinel, sim_config(), &[("linux", pool("linux", 1, "1d", "10m"))], true).await;
    env.converged("linux", 1).await;
    let api = Client::new(env.api_url.as_deref().unwrap()).await;
    let prefix = [("prefix", "linux")];
    let pause = || Some(json!({"reason": "replica test"}));
    api.ok(ADMIN, "pauseConfig", &prefix, pause()).await;

    let set = env.servers.as_mut().unwrap().downcast_mut::<Sentinels>().unwrap();
    let replica = set.servers.iter().position(|s| s.port() != set.primary_port()).unwrap();
    set.servers[replica].kill();
    let (status, body) = api.call(Some(ADMIN), "resumeConfig", &prefix, None).await;
    assert_eq!(status, 503, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("0 of 1 replicas acknowledged") && message.contains("make the same call again"),
        "{message}"
    );
    // A read is not held back.
    api.ok(ADMIN, "config", &prefix, None).await;

    let set = env.servers.as_mut().unwrap().downcast_mut::<Sentinels>().unwrap();
    set.servers[replica].restart();
    eventually("the replica is back and acknowledges", Duration::from_secs(30), || async {
        let (status, _) = api.call(Some(ADMIN), "pauseConfig", &prefix, pause()).await;
        (status == 200).then_some(())
    })
    .await;
    env.stop().await;
}

/// A Redis that comes back empty (restarted without persistence: the worst a failover can
/// lose) loses no instance: the Configs are imported again from their files, and each VM is
/// adopted back from its instance's labels, with its hostname; nothing is inserted or deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vms_whose_records_were_lost_are_adopted_back_from_their_instances() {
    let mut env =
        Env::start(Backend::Redis, sim_config(), &[("linux", pool("linux", 3, "1d", "10m"))], true).await;
    env.converged("linux", 3).await;
    let before: Vec<String> = env.vms("linux").await.into_iter().map(|v| v.hostname).collect();
    let inserts = env.inserts();

    env._redis.as_mut().unwrap().restart();
    eventually("the records come back", Duration::from_secs(60), || async {
        // Reads fail until the service has reconnected.
        let ids = env.ctx.ports.store.vm_ids(VmIndex::OfConfig("linux".into())).await.ok()?;
        (ids.len() == 3).then_some(())
    })
    .await;
    env.converged("linux", 3).await;
    let mut after: Vec<String> = env.vms("linux").await.into_iter().map(|v| v.hostname).collect();
    after.sort();
    let mut before = before;
    before.sort();
    assert_eq!(after, before, "the same incarnations, adopted");
    assert_eq!(env.inserts(), inserts, "nothing inserted again");
    let running = env.instances("linux");
    assert_eq!(running.keys().cloned().collect::<Vec<_>>(), before, "nothing deleted: {running:?}");
    env.stop().await;
}
