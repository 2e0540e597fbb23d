//! The operator's day over HTTP, on Redis and the simulator: apply a Config and watch it
//! converge, change its amount, pause (creation stops, deletion goes on), plan (nothing
//! changes), recycle one VM, delete it (drained after the grace), retry a dead task.

use std::time::Duration;

use gce_backend_queues::testing::eventually;
use serde_json::json;

use super::{ADMIN, Client, WRITER, config};
use crate::support::{Backend, Env, sim_config};

const LIMIT: Duration = Duration::from_secs(60);

/// Instance inserts the simulator has seen for `prefix`.
fn inserts(env: &Env, prefix: &str) -> usize {
    env.state()["inserts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["name"].as_str().unwrap().starts_with(&format!("{prefix}-")))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_drives_a_config_through_the_api() {
    let env = Env::start(Backend::Redis, sim_config(), &[], true).await;
    let api = Client::new(env.api_url.as_deref().unwrap()).await;
    let web = [("prefix", "web")];

    // Apply: created over the API, owned by the writer's group; it converges.
    let (status, made) =
        api.call(Some(WRITER), "createConfig", &web, Some(config("web", &["infra"], 2, 6))).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["status"]["source"], "api");
    env.converged("web", 2).await;
    let (status, again) =
        api.call(Some(WRITER), "createConfig", &web, Some(config("web", &["infra"], 2, 6))).await;
    assert_eq!((status, again["code"].as_str()), (409, Some("RequestConflict")));

    // Amount: set, and clamped to the bounds.
    let v = api.ok(WRITER, "updateAmount", &web, Some(json!({"amount": 3}))).await;
    assert_eq!(v["amount"], 3);
    env.converged("web", 3).await;
    let v = api.ok(WRITER, "updateAmount", &web, Some(json!({"amount": 50}))).await;
    assert_eq!(v["amount"], 6, "clamped to max");
    let v = api.ok(WRITER, "updateAmount", &web, Some(json!({"amount": 3}))).await;
    assert_eq!(v["amount"], 3);
    env.converged("web", 3).await;

    // Plan: says what would happen, changes nothing.
    let before: Vec<_> = env.vms("web").await.into_iter().map(|v| v.hostname).collect();
    let plan = api.ok(WRITER, "planConfig", &web, Some(json!({"amount": 1}))).await;
    let what = |p: &serde_json::Value| {
        (p["amount"].clone(), p["drain"].clone(), p["create"].clone(), p["keep"].clone())
    };
    // Clamped to min 2: one of the three goes, the longest idle (idle first).
    let (amount, drain, create, keep) = what(&plan);
    assert_eq!((amount, drain.as_array().map(Vec::len), create), (json!(2), Some(1), json!([])), "{plan}");
    let mut all: Vec<&str> =
        drain.as_array().unwrap().iter().chain(keep.as_array().unwrap()).filter_map(|v| v.as_str()).collect();
    all.sort();
    assert_eq!(all, ["web-0", "web-1", "web-2"], "{plan}");
    let plan = api.ok(WRITER, "planConfig", &web, Some(json!({"amount": 5}))).await;
    assert_eq!(
        what(&plan),
        (json!(5), json!([]), json!(["web-3", "web-4"]), json!(["web-0", "web-1", "web-2"]))
    );
    let mut bigger = config("web", &["infra"], 2, 6);
    bigger["attributes"]["machine_type"] = json!("zones/{{.Zone}}/machineTypes/e2-standard-4");
    let plan = api.ok(WRITER, "planConfig", &web, Some(json!({"config": bigger}))).await;
    let change =
        plan["changes"].as_array().unwrap().iter().find(|c| c["field"] == "attributes.machine_type").cloned();
    assert_eq!(change.map(|c| c["applies_to"].clone()), Some(json!("existing VMs, replaced now")), "{plan}");
    assert_eq!(
        (plan["replace"].clone(), plan["keep"].clone()),
        (json!(["web-0", "web-1", "web-2"]), json!([]))
    );
    let entry = api.ok(WRITER, "config", &web, None).await;
    assert_eq!(entry["amount"], 3, "the plan changed nothing");
    assert_eq!(env.vms("web").await.into_iter().map(|v| v.hostname).collect::<Vec<_>>(), before);

    // Pause: a raised amount creates nothing; a lowered one still drains.
    let v = api.ok(WRITER, "pauseConfig", &web, Some(json!({"reason": "maintenance"}))).await;
    assert_eq!(v["status"]["paused"]["reason"], "maintenance");
    let seen = inserts(&env, "web");
    api.ok(WRITER, "updateAmount", &web, Some(json!({"amount": 5}))).await;
    tokio::time::sleep(Duration::from_secs(3)).await; // three import/expand ticks
    assert_eq!(inserts(&env, "web"), seen, "paused: no insert");
    api.ok(WRITER, "updateAmount", &web, Some(json!({"amount": 2}))).await;
    env.converged("web", 2).await;
    api.ok(WRITER, "resumeConfig", &web, None).await;
    api.ok(WRITER, "updateAmount", &web, Some(json!({"amount": 3}))).await;
    env.converged("web", 3).await;

    // Recycle: that VM gets a new incarnation, the others keep theirs.
    let old: std::collections::BTreeMap<_, _> =
        env.vms("web").await.into_iter().map(|v| (v.id, v.hostname)).collect();
    let v = api.ok(WRITER, "vm", &[("id", "web-1")], None).await;
    assert_eq!(
        (v["vm"]["state"].as_str(), v["instance_status"].as_str()),
        (Some("connected"), Some("RUNNING")),
        "{v}"
    );
    let v = api.ok(WRITER, "recycleVm", &[("id", "web-1")], None).await;
    assert_eq!(v["vm"]["vm"]["drained"], true);
    eventually("web-1 is replaced", LIMIT, || async {
        let now: std::collections::BTreeMap<_, _> =
            env.vms("web").await.into_iter().map(|v| (v.id, v.hostname)).collect();
        (now.len() == 3
            && now["web-1"] != old["web-1"]
            && now["web-0"] == old["web-0"]
            && now["web-2"] == old["web-2"])
            .then_some(())
    })
    .await;
    env.converged("web", 3).await;
    let list = api.ok(WRITER, "listVms", &[("prefix", "web"), ("state", "connected")], None).await;
    assert_eq!(list["vms"].as_array().unwrap().len(), 3);

    // Delete: orphaned now, drained and gone after the grace (2 s in these settings).
    let v = api.ok(WRITER, "deleteConfig", &web, None).await;
    assert_eq!(v["status"]["state"], "orphaned");
    eventually("web is gone", LIMIT, || async {
        let (status, _) = api.call(Some(WRITER), "config", &web, None).await;
        (status == 404 && env.vms("web").await.is_empty() && env.instances("web").is_empty()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_task_is_seen_and_retried_over_the_api() {
    let env = Env::start(Backend::Redis, sim_config(), &[], true).await;
    let api = Client::new(env.api_url.as_deref().unwrap()).await;
    // A payload this build cannot read fails for good and dies.
    let queue = env.ctx.queues.get("create_instance");
    queue.push("bogus", &json!({"bogus": 1}), gce_backend_queues::When::Now).await.unwrap();
    let q = [("queue", "create_instance")];
    let dead = eventually("the task is dead", LIMIT, || async {
        let v = api.ok(ADMIN, "deadTasks", &q, None).await;
        v["tasks"].as_array().unwrap().first().cloned()
    })
    .await;
    let id = dead["task_id"].as_str().unwrap().to_owned();
    assert!(id.len() >= 16 && !id.chars().all(|c| c.is_ascii_digit()), "random task id: {id}");
    let v = api.ok(ADMIN, "retryTask", &[("queue", "create_instance"), ("taskId", &id)], None).await;
    assert_eq!(v["count"], 1);
    eventually("it ran again", LIMIT, || async {
        let t = api.ok(ADMIN, "task", &[("queue", "create_instance"), ("taskId", &id)], None).await;
        (t["runs"].as_array().unwrap().len() >= 2).then_some(())
    })
    .await;
    let (status, v) =
        api.call(Some(ADMIN), "retryTask", &[("queue", "create_instance"), ("taskId", "nope")], None).await;
    assert_eq!((status, v["code"].as_str()), (404, Some("ResourceNotFound")));
    // A task of no Config a writer may read is hidden from it, as a missing one.
    let (status, _) =
        api.call(Some(WRITER), "task", &[("queue", "create_instance"), ("taskId", &id)], None).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_and_the_api_never_overwrite_each_other() {
    let linux = crate::support::pool("linux", 1, "1d", "10m");
    let env = Env::start(Backend::Redis, sim_config(), &[("linux", linux)], true).await;
    let api = Client::new(env.api_url.as_deref().unwrap()).await;
    env.converged("linux", 1).await;
    // The API may not take a file's prefix, nor replace or delete a file's Config…
    let (status, v) =
        api.call(Some(ADMIN), "createConfig", &[("prefix", "linux")], Some(config("linux", &[], 1, 2))).await;
    assert_eq!((status, v["code"].as_str()), (409, Some("RequestConflict")), "{v}");
    let (status, _) =
        api.call(Some(ADMIN), "updateConfig", &[("prefix", "linux")], Some(config("linux", &[], 1, 2))).await;
    assert_eq!(status, 409);
    let (status, _) = api.call(Some(ADMIN), "deleteConfig", &[("prefix", "linux")], None).await;
    assert_eq!(status, 409);
    // …but may change its amount and pause it, as LUCI's Update does.
    let v = api.ok(ADMIN, "updateAmount", &[("prefix", "linux")], Some(json!({"amount": 2}))).await;
    assert_eq!(
        (v["amount"].clone(), v["status"]["source"].clone()),
        (json!(1), json!("linux.yaml")),
        "clamped: max 1"
    );
    // A file naming an API Config's prefix is an error of that file and changes nothing.
    api.ok(ADMIN, "createConfig", &[("prefix", "web")], Some(config("web", &[], 1, 1))).await;
    env.converged("web", 1).await;
    env.write_pool("web", &crate::support::pool("web", 3, "1d", "10m"));
    let report = eventually("the file's error is reported", LIMIT, || async {
        let r = env.report(false).await;
        r.files.iter().any(|f| f.path.ends_with("web.yaml")).then_some(r)
    })
    .await;
    let web = report.configs.iter().find(|c| c.prefix == "web").unwrap();
    assert_eq!(web.source, "api", "{report:?}");
    let entry = api.ok(ADMIN, "config", &[("prefix", "web")], None).await;
    assert_eq!(entry["amount"], 1);
}
