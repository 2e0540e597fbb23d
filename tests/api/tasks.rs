//! The API decides for its clients: each task listed names its Config (by the one rule,
//! `work::config_of`) and whether the caller may retry it, and `whoami` says what the caller's
//! role lets it do, so the dashboard re-decides neither.

use gce_backend_queues::When;
use serde_json::{Value, json};

use super::{ADMIN, Client, READER, TOKENS, WRITER, config};
use crate::support::{Backend, Env, sim_config};

/// The task of `key` on a page of tasks.
fn listed<'a>(page: &'a Value, key: &str) -> Option<&'a Value> {
    page["tasks"].as_array().unwrap().iter().find(|t| t["key"] == key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_task_listed_names_its_config_and_whether_the_caller_may_retry_it() {
    let env = Env::start(Backend::Memory, sim_config(), &[], false).await;
    let api = Client::new(&super::serve(env.ctx.clone()).await).await;
    api.ok(ADMIN, "createConfig", &[("prefix", "linux")], Some(config("linux", &["infra"], 0, 4))).await;
    // A guarded key (`<VM id>@<hostname>`) on a by-VM queue is its VM's Config's; a project key
    // is no Config's.
    let guarded = "linux-3@linux-3-ab12";
    let terminate = env.ctx.queues.get("terminate_bot");
    terminate.push(guarded, &json!({"id": "linux-3", "hostname": "linux-3-ab12"}), When::Now).await.unwrap();
    let quota = env.ctx.queues.get("report_quota");
    quota.push("my-proj", &json!({"project": "my-proj"}), When::Now).await.unwrap();

    let page = api.ok(ADMIN, "pendingTasks", &[("queue", "terminate_bot")], None).await;
    let t = listed(&page, guarded).unwrap_or_else(|| panic!("{page}"));
    assert_eq!((&t["config"], &t["may_retry"]), (&json!("linux"), &json!(true)), "{t}");
    let id = t["task_id"].as_str().unwrap().to_owned();
    let page = api.ok(ADMIN, "pendingTasks", &[("queue", "report_quota")], None).await;
    let t = listed(&page, "my-proj").unwrap_or_else(|| panic!("{page}"));
    assert_eq!((&t["config"], &t["may_retry"]), (&Value::Null, &json!(true)), "{t}");

    // A writer of the Config's group may retry its task, a reader of that group may not; the
    // one task method answers the same.
    for (token, may_retry) in [(WRITER, true), (READER, false), (ADMIN, true)] {
        let page = api.ok(token, "pendingTasks", &[("queue", "terminate_bot")], None).await;
        let t = listed(&page, guarded).unwrap_or_else(|| panic!("{token}: {page}"));
        assert_eq!((&t["config"], &t["may_retry"]), (&json!("linux"), &json!(may_retry)), "{token}: {t}");
        let one = api.ok(token, "task", &[("queue", "terminate_bot"), ("taskId", &id)], None).await;
        assert_eq!((&one["config"], &one["may_retry"]), (&json!("linux"), &json!(may_retry)), "{token}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whoami_says_what_each_role_may_do() {
    let env = Env::start(Backend::Memory, sim_config(), &[], false).await;
    let api = Client::new(&super::serve(env.ctx.clone()).await).await;
    for (token, name, role, groups) in TOKENS {
        let want = match role {
            gce_backend::api::auth::Role::Reader => json!({"read": true, "write": false, "admin": false}),
            gce_backend::api::auth::Role::Writer => json!({"read": true, "write": true, "admin": false}),
            gce_backend::api::auth::Role::Admin => json!({"read": true, "write": true, "admin": true}),
            _ => {
                // A metrics token calls no method, whoami included.
                let (status, _) = api.call(Some(token), "whoami", &[], None).await;
                assert_eq!(status, 403, "{name}");
                continue;
            }
        };
        let v = api.ok(token, "whoami", &[], None).await;
        assert_eq!(v, json!({"name": name, "role": role, "groups": groups, "may": want}), "{name}");
    }
    env.stop().await;
}
