//! An operator's write waits for the replica behind the sentinels: answered 2xx once the replica
//! holds it, 503 (saying the change may be lost) while no replica answers, and 2xx again when
//! one is back.

use std::time::Duration;

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
