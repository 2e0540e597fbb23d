//! Tasks on bots: bot groups give dimensions, bots take matching tasks oldest first, busy and
//! idle show in ListBots and CountBots, CountTasks counts by state and tags, TerminateBot waits
//! for the running task, and a deleted instance's task ends BOT_DIED.

use std::time::Duration;

use gce_backend_sim::SimConfig;
use google_cloud_lro::Poller;
use serde_json::{Value, json};

use crate::support::{SimHandle, eventually, quick, start};

const SERVER: &str = "swarm.example.com";
const URL: &str = "https://swarm.example.com/";
const WAIT: Duration = Duration::from_secs(10);

/// `quick()` with bots named `ci-linux-*` in pool ci on Linux, `ci-mac-*` on Mac.
pub(crate) fn grouped() -> SimConfig {
    let groups = json!({"groups": [
        {"prefix": "ci-linux-", "dimensions": {"pool": ["ci"], "os": ["Linux", "Ubuntu"]}},
        {"prefix": "ci-", "dimensions": {"pool": ["ci"], "os": ["Mac"]}},
    ]});
    SimConfig { bot_groups: gce_backend_sim::config::BotGroups::parse(&groups).unwrap(), ..quick() }
}

/// Creates instance `name` with a bot and waits until the bot is alive.
pub(crate) async fn bot_up(s: &SimHandle, name: &str) -> Value {
    s.create(name, None, &[], Some(URL)).await;
    eventually("the bot connects", WAIT, || async {
        s.prpc(SERVER, "GetBot", json!({"botId": name})).await.ok().filter(|b| b.get("isDead").is_none())
    })
    .await
}

pub(crate) async fn add(s: &SimHandle, tasks: Value) -> Vec<String> {
    let (status, v) = s.admin_post("/sim/tasks", tasks).await;
    assert_eq!(status, 200, "{v}");
    v["ids"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_owned()).collect()
}

pub(crate) async fn task(s: &SimHandle, id: &str) -> Value {
    let all = s.admin_get("/sim/tasks").await;
    all["tasks"].as_array().unwrap().iter().find(|t| t["id"] == id).cloned().expect("the task is listed")
}

pub(crate) async fn state_becomes(s: &SimHandle, id: &str, state: &str) -> Value {
    eventually(&format!("task {id} is {state}"), WAIT, || async {
        Some(task(s, id).await).filter(|t| t["state"] == state)
    })
    .await
}

async fn count_tasks(s: &SimHandle, body: Value) -> Result<Value, (u16, String)> {
    s.prpc_to(SERVER, "swarming.v2.Tasks", "CountTasks", body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bots_take_matching_tasks_oldest_first() {
    let s = start(grouped()).await;
    let ids = add(
        &s,
        json!({"tasks": [
            {"id": "mac", "dimensions": {"pool": "ci", "os": "Mac"}, "duration_ms": 60000},
            {"id": "first", "dimensions": {"pool": "ci", "os": "Linux"}, "duration_ms": 300},
            {"id": "second", "dimensions": {"pool": ["ci"], "os": "Windows|Ubuntu"}, "duration_ms": 300},
        ]}),
    )
    .await;
    assert_eq!(ids, ["mac", "first", "second"]);
    let bot = bot_up(&s, "ci-linux-1-abcd").await;
    let dims = &bot["dimensions"];
    assert!(dims.as_array().unwrap().contains(&json!({"key": "os", "value": ["Linux", "Ubuntu"]})), "{dims}");
    assert!(dims.as_array().unwrap().contains(&json!({"key": "id", "value": ["ci-linux-1-abcd"]})), "{dims}");

    let first = state_becomes(&s, "first", "COMPLETED").await;
    let second = state_becomes(&s, "second", "COMPLETED").await;
    assert_eq!(first["bot"]["id"], "ci-linux-1-abcd");
    assert!(second["startedMs"].as_u64() >= first["endedMs"].as_u64(), "in order: {first} {second}");
    assert!(second["createdMs"].as_u64() >= first["createdMs"].as_u64());
    let mac = task(&s, "mac").await;
    assert_eq!(mac["state"], "PENDING", "a Linux bot does not take a Mac task: {mac}");
    let all = s.admin_get("/sim/tasks").await;
    assert_eq!(
        all["totals"],
        json!({"total": 3, "PENDING": 1, "RUNNING": 0, "COMPLETED": 2, "BOT_DIED": 0, "CANCELED": 0})
    );

    // A task arriving while a matching bot is idle starts at once.
    let now = add(&s, json!({"dimensions": {"pool": "ci"}, "duration_ms": 60000})).await;
    assert_eq!(task(&s, &now[0]).await["state"], "RUNNING");
    // Bad tasks: 400, nothing added.
    for bad in [
        json!({"dimensions": {"pool": 3}, "duration_ms": 1}),
        json!({"dimensions": {"pool": "ci"}}),
        json!({"tasks": [{"dimensions": {"pool": "ci"}, "duration_ms": 1}, {"id": "mac", "dimensions": {}, "duration_ms": 1}]}),
    ] {
        let (status, v) = s.admin_post("/sim/tasks", bad.clone()).await;
        assert_eq!(status, 400, "{bad} → {v}");
    }
    assert_eq!(s.admin_get("/sim/tasks").await["totals"]["total"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_and_idle_show_in_list_bots_and_count_bots() {
    let s = start(grouped()).await;
    bot_up(&s, "ci-linux-1-aaaa").await;
    bot_up(&s, "ci-linux-2-bbbb").await;
    bot_up(&s, "ci-mac-1-cccc").await;
    let ids = add(&s, json!({"dimensions": {"pool": "ci", "os": "Linux"}, "duration_ms": 60000})).await;
    let running = task(&s, &ids[0]).await;
    let busy_bot = running["bot"]["id"].as_str().unwrap().to_owned();

    let pool = json!([{"key": "pool", "value": "ci"}]);
    let linux = json!([{"key": "pool", "value": "ci"}, {"key": "os", "value": "Linux"}]);
    let c = s.prpc(SERVER, "CountBots", json!({"dimensions": pool})).await.unwrap();
    assert_eq!((c["count"].clone(), c["busy"].clone(), c.get("dead")), (json!(3), json!(1), None), "{c}");
    let c = s.prpc(SERVER, "CountBots", json!({"dimensions": linux})).await.unwrap();
    assert_eq!((c["count"].clone(), c["busy"].clone()), (json!(2), json!(1)), "{c}");
    let c = s
        .prpc(SERVER, "CountBots", json!({"dimensions": [{"key": "os", "value": "Mac|Windows"}]}))
        .await
        .unwrap();
    assert_eq!((c["count"].clone(), c.get("busy")), (json!(1), None), "{c}");
    let c =
        s.prpc(SERVER, "CountBots", json!({"dimensions": [{"key": "os", "value": "Plan9"}]})).await.unwrap();
    assert!(c.get("count").is_none() && c["now"].is_string(), "zero counts are omitted: {c}");

    let list = |filter: Value| async { s.prpc(SERVER, "ListBots", filter).await.unwrap() };
    let busy = list(json!({"isBusy": "TRUE", "dimensions": pool})).await;
    assert_eq!(busy["items"].as_array().unwrap().len(), 1, "{busy}");
    assert_eq!(busy["items"][0]["botId"], busy_bot.as_str());
    assert_eq!(busy["items"][0]["taskId"], ids[0].as_str());
    let idle = list(json!({"isBusy": "FALSE", "isDead": "FALSE", "dimensions": linux})).await;
    let idle: Vec<&Value> = idle["items"].as_array().unwrap().iter().collect();
    assert_eq!(idle.len(), 1);
    assert!(idle[0].get("taskId").is_none() && idle[0]["botId"] != busy_bot.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tasks_by_state_and_tags() {
    let s = start(grouped()).await;
    bot_up(&s, "ci-linux-1-aaaa").await;
    let ids = add(
        &s,
        json!({"tasks": [
            {"dimensions": {"pool": "ci", "os": "Linux"}, "duration_ms": 60000},
            {"dimensions": {"pool": "ci", "os": "Linux"}, "duration_ms": 60000},
            {"dimensions": {"pool": "ci", "os": "Mac"}, "duration_ms": 60000},
            {"dimensions": {"pool": "gpu"}, "duration_ms": 60000},
        ]}),
    )
    .await;
    assert_eq!(task(&s, &ids[0]).await["state"], "RUNNING");
    let from = "2020-01-01T00:00:00Z";
    let count = |state: &'static str, tags: Value| {
        let s = &s;
        async move {
            let v = count_tasks(s, json!({"start": from, "state": state, "tags": tags})).await.unwrap();
            assert!(v["now"].is_string(), "{v}");
            v.get("count").map(|c| c.as_u64().unwrap()).unwrap_or(0)
        }
    };
    assert_eq!(count("QUERY_PENDING", json!(["pool:ci"])).await, 2);
    assert_eq!(count("QUERY_RUNNING", json!(["pool:ci"])).await, 1);
    assert_eq!(count("QUERY_PENDING_RUNNING", json!(["pool:ci"])).await, 3);
    assert_eq!(count("QUERY_PENDING", json!(["pool:ci|gpu"])).await, 3);
    assert_eq!(count("QUERY_PENDING", json!(["pool:ci", "os:Mac|Windows"])).await, 1);
    assert_eq!(count("QUERY_ALL", json!([])).await, 4);
    assert_eq!(count("QUERY_RUNNING", json!(["pool:gpu"])).await, 0);
    // The default state is QUERY_PENDING; a zero count is omitted.
    let v = count_tasks(&s, json!({"start": from, "tags": ["pool:gpu"]})).await.unwrap();
    assert_eq!(v["count"], 1);
    let v = count_tasks(&s, json!({"start": from, "tags": ["pool:none"]})).await.unwrap();
    assert!(v.get("count").is_none(), "{v}");
    // Created before start: not counted.
    let v = count_tasks(
        &s,
        json!({"start": "2100-01-01T00:00:00Z", "end": "2100-01-02T00:00:00Z", "state": "QUERY_ALL"}),
    )
    .await
    .unwrap();
    assert!(v.get("count").is_none(), "{v}");

    let (code, text) = count_tasks(&s, json!({"state": "QUERY_PENDING"})).await.unwrap_err();
    assert_eq!((code, text.trim()), (3, "start timestamp is required"));
    let (code, _) = count_tasks(&s, json!({"start": from, "tags": ["nocolon"]})).await.unwrap_err();
    assert_eq!(code, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_bot_waits_for_the_running_task() {
    let s = start(grouped()).await;
    bot_up(&s, "ci-linux-1-aaaa").await;
    let ids = add(&s, json!({"dimensions": {"pool": "ci"}, "duration_ms": 800})).await;
    assert_eq!(task(&s, &ids[0]).await["state"], "RUNNING");
    let t = s.prpc(SERVER, "TerminateBot", json!({"botId": "ci-linux-1-aaaa"})).await.unwrap();
    let bot = s.prpc(SERVER, "GetBot", json!({"botId": "ci-linux-1-aaaa"})).await.unwrap();
    assert!(bot.get("isDead").is_none(), "alive while its task runs: {bot}");
    assert_eq!(bot["taskId"], ids[0].as_str());
    // A task added now waits: the terminating bot takes no new work.
    let later = add(&s, json!({"dimensions": {"pool": "ci"}, "duration_ms": 100})).await;

    let done = state_becomes(&s, &ids[0], "COMPLETED").await;
    let bot = eventually("the bot terminates", WAIT, || async {
        s.prpc(SERVER, "GetBot", json!({"botId": "ci-linux-1-aaaa"}))
            .await
            .ok()
            .filter(|b| b["isDead"] == true)
    })
    .await;
    assert_eq!(bot["terminationTaskId"], t["taskId"]);
    let events = s.prpc(SERVER, "ListBotEvents", json!({"botId": "ci-linux-1-aaaa"})).await.unwrap();
    assert_eq!(events["items"][0]["eventType"], "bot_terminate", "{events}");
    assert_eq!(done["state"], "COMPLETED");
    assert_eq!(task(&s, &later[0]).await["state"], "PENDING");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_instance_s_running_task_ends_bot_died() {
    let s = start(grouped()).await;
    bot_up(&s, "ci-linux-1-aaaa").await;
    let ids = add(&s, json!({"dimensions": {"pool": "ci"}, "duration_ms": 60000})).await;
    assert_eq!(task(&s, &ids[0]).await["state"], "RUNNING");
    let c = s.instances().await;
    let op = c.delete().set_project("proj").set_zone("us-central1-b").set_instance("ci-linux-1-aaaa");
    op.poller().until_done().await.unwrap().to_result().unwrap();
    let died = task(&s, &ids[0]).await;
    assert_eq!(died["state"], "BOT_DIED", "{died}");
    let summary = s.admin_get("/sim/summary").await;
    assert_eq!(summary["tasks"]["interrupted"], 1, "{}", summary["tasks"]);
    assert_eq!(summary["actions"]["delete"], 1);
    // The dead bot takes nothing: a new task stays pending.
    let later = add(&s, json!({"dimensions": {"pool": "ci"}, "duration_ms": 100})).await;
    assert_eq!(task(&s, &later[0]).await["state"], "PENDING");
}
