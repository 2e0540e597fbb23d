//! Suspend/resume and stop/start through the official clients: statuses, the bot silenced and
//! back (the same bot after a resume, a new one after a start), the task a suspend interrupts,
//! CPU quota released while suspended or stopped, and the seconds and actions in the summary.
//! The official Python client suspends and resumes too (`suspend_resume.py`).

use std::time::Duration;

use google_cloud_compute_v1::client::Instances;
use google_cloud_compute_v1::model::instance::Status;
use google_cloud_lro::Poller;
use serde_json::json;

use crate::support::{SimHandle, eventually, http_error, rid, start};
use crate::work::{add, bot_up, grouped, state_becomes, task};

const P: &str = "proj";
const Z: &str = "us-central1-b";
const SERVER: &str = "swarm.example.com";
const WAIT: Duration = Duration::from_secs(10);

async fn status_becomes(c: &Instances, name: &str, want: Status) {
    eventually(&format!("{name} is {want:?}"), WAIT, || async {
        let i = c.get().set_project(P).set_zone(Z).set_instance(name).send().await.ok()?;
        (i.status == Some(want.clone())).then_some(())
    })
    .await
}

async fn cpus_used(s: &SimHandle) -> f64 {
    let regions = s.regions().await.list().set_project(P).send().await.unwrap();
    let r = regions.items.iter().find(|r| r.name.as_deref() == Some("us-central1")).unwrap();
    r.quotas.iter().find(|q| q.metric.as_ref().and_then(|m| m.name()) == Some("CPUS")).unwrap().usage.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume_through_the_official_client() {
    let s = start(grouped()).await;
    let c = s.instances().await;
    let name = "ci-linux-1-aaaa";
    let before = bot_up(&s, name).await;
    let ids = add(&s, json!({"dimensions": {"pool": "ci"}, "duration_ms": 60000})).await;
    assert_eq!(task(&s, &ids[0]).await["state"], "RUNNING");
    assert_eq!(cpus_used(&s).await, 2.0);

    let suspend =
        || c.suspend().set_project(P).set_zone(Z).set_instance(name).set_request_id(rid("suspend-1"));
    let op = suspend().poller().until_done().await.unwrap().to_result().unwrap();
    assert_eq!(op.operation_type.as_deref(), Some("suspend"));
    let again = suspend().send().await.unwrap();
    assert_eq!(again.name, op.name, "same requestId, same operation");
    status_becomes(&c, name, Status::Suspended).await;
    assert_eq!(task(&s, &ids[0]).await["state"], "BOT_DIED", "a suspend interrupts the task");
    assert_eq!(cpus_used(&s).await, 0.0, "a suspended instance holds no CPUs");
    let silent = s.prpc(SERVER, "GetBot", json!({"botId": name})).await.unwrap();
    let dead = eventually("the silent bot is dead", WAIT, || async {
        s.prpc(SERVER, "GetBot", json!({"botId": name})).await.ok().filter(|b| b["isDead"] == true)
    })
    .await;
    assert_eq!(dead["lastSeenTs"], silent["lastSeenTs"], "last seen is frozen while suspended");
    // Only a RUNNING instance can be suspended.
    let err = c.suspend().set_project(P).set_zone(Z).set_instance(name).send().await.unwrap_err();
    assert_eq!(http_error(&err).0, Some(400), "{err}");

    c.resume()
        .set_project(P)
        .set_zone(Z)
        .set_instance(name)
        .poller()
        .until_done()
        .await
        .unwrap()
        .to_result()
        .unwrap();
    status_becomes(&c, name, Status::Running).await;
    let back = s.prpc(SERVER, "GetBot", json!({"botId": name})).await.unwrap();
    assert!(back.get("isDead").is_none(), "the same bot is back: {back}");
    assert_eq!(back["firstSeenTs"], before["firstSeenTs"]);
    assert_eq!(cpus_used(&s).await, 2.0);
    let next = add(&s, json!({"dimensions": {"pool": "ci"}, "duration_ms": 100})).await;
    state_becomes(&s, &next[0], "COMPLETED").await;

    let summary = s.admin_get("/sim/summary").await;
    assert_eq!(summary["actions"]["suspend"], 1);
    assert_eq!(summary["actions"]["resume"], 1);
    assert!(summary["usage"]["suspendedSeconds"].as_f64().unwrap() > 0.0, "{}", summary["usage"]);
    assert!(summary["usage"]["runningSeconds"].as_f64().unwrap() > 0.0);
    assert_eq!(summary["tasks"]["interrupted"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_and_start_through_the_official_client() {
    let s = start(grouped()).await;
    let c = s.instances().await;
    let name = "ci-linux-2-bbbb";
    let before = bot_up(&s, name).await;
    c.stop()
        .set_project(P)
        .set_zone(Z)
        .set_instance(name)
        .poller()
        .until_done()
        .await
        .unwrap()
        .to_result()
        .unwrap();
    status_becomes(&c, name, Status::Terminated).await;
    assert_eq!(cpus_used(&s).await, 0.0);
    let err = c.suspend().set_project(P).set_zone(Z).set_instance(name).send().await.unwrap_err();
    assert_eq!(http_error(&err).0, Some(400), "a stopped instance cannot be suspended");
    let err = c.resume().set_project(P).set_zone(Z).set_instance(name).send().await.unwrap_err();
    assert_eq!(http_error(&err).0, Some(400), "only a suspended instance resumes");
    eventually("the stopped instance's bot is dead", WAIT, || async {
        s.prpc(SERVER, "GetBot", json!({"botId": name})).await.ok().filter(|b| b["isDead"] == true)
    })
    .await;

    c.start()
        .set_project(P)
        .set_zone(Z)
        .set_instance(name)
        .poller()
        .until_done()
        .await
        .unwrap()
        .to_result()
        .unwrap();
    status_becomes(&c, name, Status::Running).await;
    let again = eventually("the bot connects anew", WAIT, || async {
        let b = s.prpc(SERVER, "GetBot", json!({"botId": name})).await.ok()?;
        (b.get("isDead").is_none() && b["firstSeenTs"] != before["firstSeenTs"]).then_some(b)
    })
    .await;
    assert!(again.get("taskId").is_none());
    let ids = add(&s, json!({"dimensions": {"pool": "ci", "os": "Linux"}, "duration_ms": 100})).await;
    state_becomes(&s, &ids[0], "COMPLETED").await;
    let summary = s.admin_get("/sim/summary").await;
    assert_eq!(
        (summary["actions"]["stop"].clone(), summary["actions"]["start"].clone()),
        (json!(1), json!(1))
    );
    assert!(summary["usage"]["stoppedSeconds"].as_f64().unwrap() > 0.0, "{}", summary["usage"]);
    assert_eq!(summary["instances"]["RUNNING"], 1);
}

/// The Python interpreter with google-cloud-compute: `$GCE_BACKEND_PYTHON`, else `python3`.
pub(crate) fn python() -> String {
    let name = std::env::var("GCE_BACKEND_PYTHON").unwrap_or_else(|_| "python3".into());
    let found = std::process::Command::new(&name)
        .args(["-c", "import google.cloud.compute_v1"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{name} cannot import google.cloud.compute_v1: scripts/test installs it (scripts/requirements.txt)"
    );
    name
}

/// Runs the test script `script` (under `tests/`) with the official Python client and `args`;
/// it must succeed and print `ok`.
pub(crate) async fn python_says_ok(script: &str, args: &[&str]) {
    let path = format!("{}/tests/{script}", env!("CARGO_MANIFEST_DIR"));
    let out =
        tokio::process::Command::new(python()).arg(&path).args(args).output().await.expect("run python");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{script} failed:\n{text}");
    assert_eq!(text.trim(), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_suspends_and_resumes() {
    let s = start(grouped()).await;
    python_says_ok("suspend_resume.py", &[&s.base, P, Z, "py-vm-1"]).await;
    let summary = s.admin_get("/sim/summary").await;
    assert_eq!(
        (summary["actions"]["suspend"].clone(), summary["actions"]["resume"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(summary["instances"]["RUNNING"], 1);
}
