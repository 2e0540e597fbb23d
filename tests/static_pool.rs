//! A static pool on Redis and the simulator: machines that exist outside Compute Engine, listed
//! by hostname, are watched (no instance is made), keep their VM ids when the list is edited,
//! and a machine taken off the list while its bot runs a task finishes that task before its bot
//! is deleted. The API refuses to add or remove them by other means than the list.

use serde_json::{Value, json};

use crate::api::{Client, WRITER, serve};
use crate::support::{Backend, Env, settings, sim_config};
use gce_backend_queues::testing::eventually;

const SERVER: &str = "https://swarm.example.com";
const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

fn lab(machines: &[&str]) -> String {
    format!(
        "prefix: lab\nprovider: lab\nmachines: {}\ntimeout: 10m\nswarming: {SERVER}\nowner: [infra]\n",
        serde_json::to_string(machines).unwrap()
    )
}

/// VM id → hostname, of the lab pool's VMs.
async fn slots(env: &Env) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> =
        env.vms("lab").await.into_iter().map(|v| (v.id, v.hostname)).collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_pool_is_watched_and_a_removed_busy_machine_finishes_its_task_first() {
    // Bots are always busy: a task ends every 1.5 s and the next starts at once.
    let sim = gce_backend::sim::SimConfig { bot_task_ms: 1500, bot_idle_ms: 0, ..sim_config() };
    let mut s = settings();
    s.providers = toml::from_str("[gce]\ntype = \"gce\"\n[lab]\ntype = \"static\"\n").unwrap();
    let env = Env::start_with(Backend::Redis, sim, &[("lab", lab(&["mac-1", "mac-2"]))], true, s).await;
    env.sim_machines(SERVER, &["mac-1", "mac-2", "mac-3"]).await;

    env.converged("lab", 2).await;
    assert_eq!(slots(&env).await, [("lab-0".into(), "mac-1".into()), ("lab-1".into(), "mac-2".into())]);
    assert!(env.state()["instances"].as_array().unwrap().is_empty(), "no instance is made");
    assert!(env.inserts().is_empty(), "nor asked for");

    // mac-1 leaves the list, mac-3 joins it (first): mac-2 keeps its id, mac-3 takes a new one.
    env.write_pool("lab", &lab(&["mac-3", "mac-2"]));
    eventually("lab converges on mac-2 and mac-3", LIMIT, || async {
        let want = [("lab-1".to_owned(), "mac-2".to_owned()), ("lab-2".to_owned(), "mac-3".to_owned())];
        (slots(&env).await == want).then_some(())
    })
    .await;
    env.converged("lab", 2).await;
    // mac-1 was asked to terminate after its task (its bot is always busy), and deleted from
    // Swarming only once it had: no bot was deleted while it ran its task.
    let since = env.ctx.now() - chrono::Duration::hours(1);
    let events = env.ctx.ports.bots.events(SERVER, "mac-1", since).await.unwrap();
    let mut kinds: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    kinds.reverse(); // oldest first
    let terminated = kinds.iter().position(|k| *k == "bot_terminate").expect("terminated");
    let deleted = kinds.iter().position(|k| *k == "bot_deleted").expect("deleted");
    assert!(terminated < deleted, "{kinds:?}");
    for id in ["mac-2", "mac-3"] {
        let events = env.ctx.ports.bots.events(SERVER, id, since).await.unwrap();
        assert!(events.iter().all(|e| e.event_type == "bot_connected"), "{id} left alone: {events:?}");
    }
    let calls = env.sim.with(|w| w.calls.clone());
    assert!(calls.keys().all(|m| !m.starts_with("compute.instances.")), "no instance call: {calls:?}");
    let text = env.ctx.metrics.text();
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("gce_backend_instance_operations_total{") && l.contains("config=\"lab\"")),
        "a static machine is recorded and released, never counted as inserted or deleted:\n{text}"
    );

    // Adding or removing machines any other way than the list is refused, and changes nothing.
    let root = serve(env.ctx.clone()).await;
    let api = Client::new(&root).await;
    let expect_refused = |(status, v): (u16, Value)| {
        assert_eq!(status, 400, "{v}");
        assert!(v["message"].as_str().unwrap().contains("static machines are managed by their list"), "{v}");
    };
    let p = [("prefix", "lab")];
    expect_refused(api.call(Some(WRITER), "updateAmount", &p, Some(json!({"amount": 5}))).await);
    expect_refused(api.call(Some(WRITER), "recycleVm", &[("id", "lab-1")], None).await);
    expect_refused(api.call(Some(WRITER), "planConfig", &p, Some(json!({"amount": 5}))).await);
    assert_eq!(env.counts("lab").await.configured, 2);
    assert!(!env.ctx.ports.store.vm("lab-1").await.unwrap().unwrap().value.drained);
    // The provider's own schema is published with the API's.
    let schema: Value = reqwest::get(format!("{root}/schemas/gce-backend/v1/provider-static.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(schema["properties"]["machines"].is_object(), "{schema}");
    env.stop().await;
}
