//! The simulator's Swarming v2 pRPC, through a reqwest pRPC client: the bot lifecycle from boot to
//! terminate to delete, the wire details (prefix, headers, codes, zero-value omission), paging,
//! and the bot faults.

use std::time::Duration;

use crate::support::eventually;
use gce_backend_sim::SimConfig;
use google_cloud_lro::Poller;
use serde_json::{Value, json};

use crate::support::{SimHandle, quick, rid, start};

const P: &str = "proj";
const Z: &str = "us-central1-b";
const SERVER: &str = "swarm.example.com";

async fn boot(s: &SimHandle, name: &str) {
    boot_as(s, name, 1).await;
}

/// Boots incarnation `n` of `name` (each incarnation has its own requestId).
async fn boot_as(s: &SimHandle, name: &str, n: u32) {
    let server = format!("https://{SERVER}/");
    s.create(name, Some(rid(&format!("create-{name}-{n}"))), &[], Some(&server)).await;
}

async fn get_bot(s: &SimHandle, id: &str) -> Result<Value, (u16, String)> {
    s.prpc(SERVER, "GetBot", json!({"botId": id})).await
}

async fn connected(s: &SimHandle, id: &str) -> Value {
    eventually("the bot connects", Duration::from_secs(10), || async { get_bot(s, id).await.ok() }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bot_lifecycle_from_boot_to_graceful_terminate_to_delete() {
    let s = start(SimConfig { bot_task_ms: 1200, bot_idle_ms: 200, ..quick() }).await;
    assert_eq!(get_bot(&s, "vm-1").await.unwrap_err().0, 5, "no bot before the instance runs");
    boot(&s, "vm-1").await;
    let bot = connected(&s, "vm-1").await;
    assert_eq!(bot["botId"], "vm-1");
    assert!(bot["firstSeenTs"].as_str().unwrap().ends_with('Z'));
    assert!(bot.get("isDead").is_none(), "false is omitted on the wire");

    let listed = s.prpc(SERVER, "ListBots", json!({"limit": 500})).await.unwrap();
    assert_eq!(listed["items"][0]["botId"], "vm-1");
    assert!(listed["now"].is_string() && listed["deathTimeout"].is_number());
    assert!(listed.get("cursor").is_none(), "no cursor on the last page");

    // Terminate while it runs a task: it finishes that task, then dies.
    let busy = eventually("the bot runs a task", Duration::from_secs(10), || async {
        get_bot(&s, "vm-1").await.ok().and_then(|b| b["taskId"].as_str().map(str::to_owned))
    })
    .await;
    let t = s.prpc(SERVER, "TerminateBot", json!({"botId": "vm-1", "reason": "GCE Provider"})).await.unwrap();
    let task = t["taskId"].as_str().unwrap().to_owned();
    let again =
        s.prpc(SERVER, "TerminateBot", json!({"botId": "vm-1", "reason": "GCE Provider"})).await.unwrap();
    assert_eq!(again["taskId"], task, "the pending termination task is returned again");
    let during = get_bot(&s, "vm-1").await.unwrap();
    assert_eq!(during["taskId"].as_str(), Some(busy.as_str()), "its current task goes on");
    assert!(during.get("isDead").is_none());
    let dead = eventually("the bot dies after its task", Duration::from_secs(10), || async {
        get_bot(&s, "vm-1").await.ok().filter(|b| b["isDead"] == true)
    })
    .await;
    assert_eq!(dead["terminationTaskId"], task);
    assert!(dead.get("taskId").is_none());

    let created = s.admin_get("/sim/state").await["instances"][0]["created"].as_str().unwrap().to_owned();
    let events = s
        .prpc(SERVER, "ListBotEvents", json!({"botId": "vm-1", "limit": 5, "start": created}))
        .await
        .unwrap();
    let kinds: Vec<&str> =
        events["items"].as_array().unwrap().iter().map(|e| e["eventType"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["bot_terminate", "bot_connected"], "newest first");

    // The instance goes, then the bot is deleted from Swarming.
    let c = s.instances().await;
    c.delete().set_project(P).set_zone(Z).set_instance("vm-1").poller().until_done().await.unwrap();
    assert_eq!(
        s.prpc(SERVER, "DeleteBot", json!({"botId": "vm-1"})).await.unwrap(),
        json!({"deleted": true})
    );
    let deleted = get_bot(&s, "vm-1").await.unwrap();
    assert_eq!(deleted["deleted"], true, "a deleted bot still answers GetBot, marked deleted");
    let listed = s.prpc(SERVER, "ListBots", json!({})).await.unwrap();
    assert!(listed.get("items").is_none(), "ListBots leaves deleted bots out");
    let (code, text) = s.prpc(SERVER, "DeleteBot", json!({"botId": "vm-1"})).await.unwrap_err();
    assert_eq!((code, text.trim()), (5, "\"vm-1\" not found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_bot_dies_at_once_on_terminate_and_a_deleted_instance_leaves_a_dead_bot() {
    let s = start(quick()).await;
    boot(&s, "vm-idle").await;
    boot(&s, "vm-gone").await;
    connected(&s, "vm-idle").await;
    connected(&s, "vm-gone").await;
    s.prpc(SERVER, "TerminateBot", json!({"botId": "vm-idle"})).await.unwrap();
    let b = get_bot(&s, "vm-idle").await.unwrap();
    assert_eq!(b["isDead"], true);
    assert!(b["terminationTaskId"].is_string());

    let c = s.instances().await;
    c.delete().set_project(P).set_zone(Z).set_instance("vm-gone").send().await.unwrap();
    let b = eventually("the bot of a deleted instance goes dead", Duration::from_secs(10), || async {
        get_bot(&s, "vm-gone").await.ok().filter(|b| b["isDead"] == true)
    })
    .await;
    assert!(b.get("terminationTaskId").is_none(), "not a termination");
    let events = s.prpc(SERVER, "ListBotEvents", json!({"botId": "vm-gone"})).await.unwrap();
    assert_eq!(events["items"][0]["eventType"], "bot_missing");
    let dead = s.prpc(SERVER, "ListBots", json!({"isDead": "TRUE"})).await.unwrap();
    assert_eq!(dead["items"].as_array().unwrap().len(), 2);
    let alive = s.prpc(SERVER, "ListBots", json!({"isDead": "FALSE"})).await.unwrap();
    assert!(alive.get("items").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prpc_wire_details_and_errors() {
    let s = start(quick()).await;
    for n in 0..5 {
        boot(&s, &format!("vm-{n}")).await;
    }
    for n in 0..5 {
        connected(&s, &format!("vm-{n}")).await;
    }
    // Raw answer: prefix, headers.
    let url = format!("{}/swarming/{SERVER}/prpc/swarming.v2.Bots/GetBot", s.base);
    let r = s
        .http
        .post(&url)
        .header("content-type", "application/json")
        .body(r#"{"bot_id":"vm-0"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-prpc-grpc-code"], "0");
    assert_eq!(r.headers()["content-type"], "application/json");
    assert!(r.text().await.unwrap().starts_with(")]}'\n{"), "snake_case field names are accepted too");
    let r = s
        .http
        .post(&url)
        .header("content-type", "application/json")
        .body(r#"{"botId":"nope"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["x-prpc-grpc-code"].to_str().unwrap()), (404, "5"));
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    assert_eq!(r.text().await.unwrap(), "no such bot: nope\n");
    let r = s.http.post(&url).body(r#"{"botId":"vm-0"}"#).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["x-prpc-grpc-code"].to_str().unwrap()), (400, "3"));
    let (code, _) = s.prpc(SERVER, "GetBotDimensions", json!({})).await.unwrap_err();
    assert_eq!(code, 12, "unimplemented");
    let (code, _) = s.prpc(SERVER, "GetBot", json!({})).await.unwrap_err();
    assert_eq!(code, 3, "bot_id is required");
    assert_eq!(s.prpc(SERVER, "ListBots", json!({"limit": 5000})).await.unwrap_err().0, 3);

    // Paging: cursor while pages are full.
    let mut ids = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = s.prpc(SERVER, "ListBots", json!({"limit": 2, "cursor": cursor})).await.unwrap();
        ids.extend(
            page["items"].as_array().into_iter().flatten().map(|b| b["botId"].as_str().unwrap().to_owned()),
        );
        match page["cursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(ids, ["vm-0", "vm-1", "vm-2", "vm-3", "vm-4"]);
    // Unknown bot events: an empty list, not an error. Other servers are separate.
    assert_eq!(s.prpc(SERVER, "ListBotEvents", json!({"botId": "nope"})).await.unwrap().get("items"), None);
    assert!(s.prpc("other.example.com", "ListBots", json!({})).await.unwrap().get("items").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bot_faults_never_connect_die_early_and_injected_errors() {
    let s = start(quick()).await;
    s.admin_post("/sim/faults", json!({"bot_never_connect_rate": 1.0})).await;
    boot(&s, "vm-silent").await;
    s.admin_post(
        "/sim/faults",
        json!({"bot_never_connect_rate": 0.0, "bot_early_death_rate": 1.0, "bot_early_death_ms": 200}),
    )
    .await;
    boot(&s, "vm-fragile").await;
    connected(&s, "vm-fragile").await;
    eventually("the fragile bot dies early", Duration::from_secs(10), || async {
        get_bot(&s, "vm-fragile").await.ok().filter(|b| b["isDead"] == true)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get_bot(&s, "vm-silent").await.unwrap_err().0, 5, "its bot never connected");

    s.admin_post("/sim/faults", json!({"errors": {"swarming.GetBot": {"rate": 1.0, "status": 503}}})).await;
    assert_eq!(get_bot(&s, "vm-fragile").await.unwrap_err().0, 14, "UNAVAILABLE");
    assert_eq!(s.calls("swarming.GetBot", 503).await, 1);
    s.admin_post("/sim/faults", json!({"errors": {"*": {"rate": 1.0, "status": 429}}})).await;
    assert_eq!(s.prpc(SERVER, "ListBots", json!({})).await.unwrap_err().0, 8, "RESOURCE_EXHAUSTED");

    // The admin API can kill a bot, and shows the whole state.
    s.admin_post("/sim/faults", json!({"errors": {}})).await;
    boot(&s, "vm-k").await;
    connected(&s, "vm-k").await;
    let (st, _) =
        s.admin_post("/sim/kill-bot", json!({"server": format!("https://{SERVER}"), "botId": "vm-k"})).await;
    assert_eq!(st, 200);
    assert_eq!(get_bot(&s, "vm-k").await.unwrap()["isDead"], true);
    let state = s.admin_get("/sim/state").await;
    assert_eq!(state["instances"].as_array().unwrap().len(), 3);
    assert_eq!(state["bots"].as_array().unwrap().len(), 2);
    assert!(state["operations"].as_array().unwrap().len() >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_instance_loses_its_bot_and_a_new_incarnation_reconnects() {
    let s = start(quick()).await;
    boot(&s, "vm-p").await;
    let first = connected(&s, "vm-p").await;
    s.admin_post("/sim/preempt", json!({"project": P, "zone": Z, "name": "vm-p"})).await;
    eventually("the preempted instance's bot is dead", Duration::from_secs(10), || async {
        get_bot(&s, "vm-p").await.ok().filter(|b| b["isDead"] == true)
    })
    .await;
    let c = s.instances().await;
    c.delete().set_project(P).set_zone(Z).set_instance("vm-p").poller().until_done().await.unwrap();
    boot_as(&s, "vm-p", 2).await;
    let second = eventually("the new incarnation's bot connects", Duration::from_secs(10), || async {
        get_bot(&s, "vm-p").await.ok().filter(|b| b.get("isDead").is_none())
    })
    .await;
    assert_ne!(first["sessionId"], second["sessionId"]);
    let seen = |b: &Value| chrono::DateTime::parse_from_rfc3339(b["firstSeenTs"].as_str().unwrap()).unwrap();
    assert!(seen(&second) > seen(&first), "timestamps compare as times, not as text of varying length");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_servers_hang_or_answer_malformed_json_while_others_answer() {
    let s = start(quick()).await;
    boot(&s, "vm-ok").await;
    connected(&s, "vm-ok").await;
    let faults =
        json!({"swarming_servers": {"hang.example.com": "hang", "https://bad.example.com/": "malformed"}});
    let (st, body) = s.admin_post("/sim/faults", faults).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["swarming_servers"], json!({"bad.example.com": "malformed", "hang.example.com": "hang"}));
    let (st, body) =
        s.admin_post("/sim/faults", json!({"swarming_servers": {"x.example.com": "slow"}})).await;
    assert_eq!(st, 400, "an unknown mode is refused: {body}");

    let call = |server: &str| {
        s.http
            .post(format!("{}/swarming/{server}/prpc/swarming.v2.Bots/ListBots", s.base))
            .header("content-type", "application/json")
            .body("{}")
            .timeout(Duration::from_millis(700))
            .send()
    };
    let (hung, state) = tokio::join!(call("hang.example.com"), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        tokio::time::timeout(Duration::from_millis(500), s.admin_get("/sim/state")).await
    });
    assert!(hung.unwrap_err().is_timeout(), "a hanging server never answers");
    assert!(state.is_ok(), "the world is not locked while a call hangs");

    let r = call("bad.example.com").await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["x-prpc-grpc-code"].to_str().unwrap()), (200, "0"));
    assert_eq!(r.headers()["content-type"], "application/json");
    let text = r.text().await.unwrap();
    let body = text.strip_prefix(")]}'\n").expect("the pRPC prefix is there");
    assert!(serde_json::from_str::<Value>(body).is_err(), "not JSON: {body}");

    assert_eq!(get_bot(&s, "vm-ok").await.unwrap()["botId"], "vm-ok", "other servers answer");
    s.admin_post("/sim/faults", json!({"swarming_servers": {}})).await;
    assert!(call("bad.example.com").await.unwrap().text().await.unwrap().starts_with(")]}'\n{"));
}
