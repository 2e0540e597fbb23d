//! Operator safety end to end, on a private `redis-server` and the simulator: no Config edit
//! destroys a pool by accident, a prefix has one owner, fan-out is bounded, a preempted
//! instance is replaced at once, and the queue commands of `recover` (Redis directly) tell the
//! truth.

use std::process::Command;
use std::time::Duration;

use gce_backend_jobs::Limits;
use gce_backend_queues::testing::eventually;
use serde_json::{Value, json};

use crate::support::{Backend, DEPLOYMENT, Env, pool, settings, sim_config};

const LIMIT: Duration = Duration::from_secs(60);

/// Lets `n` import rounds (one a second in the tests) pass, to check that nothing happened.
async fn rounds(n: u32) {
    tokio::time::sleep(Duration::from_millis(1100) * n).await;
}

/// Runs the binary against the test's Redis (`recover` reads it directly); returns (exit code,
/// stdout, stderr).
fn cli(env: &Env, args: &[&str]) -> (i32, String, String) {
    let url = env._redis.as_ref().unwrap().url();
    let out = Command::new(crate::support::BIN)
        .args(args)
        .env("GCE_BACKEND_REDIS", url)
        .env("GCE_BACKEND_NAMESPACE", DEPLOYMENT)
        .output()
        .unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), s(&out.stdout), s(&out.stderr))
}

fn status(env: &Env) -> Value {
    let (code, out, err) = cli(env, &["recover", "status", "--live"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn deletes_of(env: &Env, prefix: &str) -> usize {
    let ops = env.state()["operations"].clone();
    ops.as_array()
        .unwrap()
        .iter()
        .filter(|o| o["type"] == "delete" && o["target"].as_str().unwrap().starts_with(&format!("{prefix}-")))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_or_mistyped_file_never_destroys_its_pool_and_a_removed_one_goes_after_the_grace() {
    let pools = [("linux", pool("linux", 2, "1d", "10m")), ("builders", pool("builder", 2, "1d", "10m"))];
    let env = Env::start(Backend::Redis, sim_config(), &pools, true).await;
    env.converged("linux", 2).await;
    env.converged("builder", 2).await;
    for text in ["", "# all commented out\n", "---\n", "{}"] {
        env.write_pool("linux", text);
        rounds(3).await; // well past config_delete_grace (2 s)
        assert_eq!(env.instances("linux").len(), 2, "{text:?}");
        let rec = env.ctx.ports.store.config("linux").await.unwrap().unwrap().value;
        assert!(rec.orphaned.is_none(), "{text:?}");
    }
    env.write_pool("builders", &pool("Builder", 2, "1d", "10m"));
    rounds(3).await;
    assert_eq!(env.instances("builder").len(), 2);
    assert_eq!(deletes_of(&env, "linux") + deletes_of(&env, "builder"), 0, "nothing was deleted");
    let st = status(&env);
    let builder = st["configs"].as_array().unwrap().iter().find(|c| c["prefix"] == "builder").unwrap();
    assert_eq!(builder["state"], "active");
    assert!(builder["errors"][0]["message"].as_str().unwrap().contains("builders.yaml"), "{builder}");
    let files = st["files"].as_array().unwrap();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(st["configs"].as_array().unwrap().iter().all(|c| c["prefix"] != "Builder"));

    // Fixed, then really removed: orphaned first, deleted config_delete_grace later.
    env.write_pool("linux", &pool("linux", 2, "1d", "10m"));
    env.write_pool("builders", &pool("builder", 2, "1d", "10m"));
    eventually("the file errors clear", LIMIT, || async {
        env.ctx.ports.store.file_errors().await.unwrap().is_empty().then_some(())
    })
    .await;
    std::fs::remove_file(env.dir.join("builders.yaml")).unwrap();
    eventually("builder's instances are gone", LIMIT, || async {
        (env.instances("builder").is_empty()
            && env.ctx.ports.store.config("builder").await.unwrap().is_none())
        .then_some(())
    })
    .await;
    let errors = env.ctx.ports.store.errors("builder").await.unwrap_or_default();
    let at = |code: &str| errors.iter().find(|e| e.code == code).map(|e| e.time);
    let (orphaned, deleted) = (at("orphaned").expect("orphaned first"), at("deleted").expect("then deleted"));
    // The grace is 2 s; the two entries are written a few milliseconds after their decisions.
    let grace = chrono::Duration::seconds(2) - chrono::Duration::milliseconds(500);
    assert!(deleted - orphaned >= grace, "not before the grace: {orphaned} → {deleted}");
    env.converged("linux", 2).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_has_one_owner_and_newcomers_are_refused_on_their_own_file() {
    let env =
        Env::start(Backend::Redis, sim_config(), &[("linux", pool("linux", 2, "1d", "10m"))], true).await;
    env.converged("linux", 2).await;
    env.write_pool("a-linux-copy", &pool("linux", 4, "1d", "10m"));
    env.write_pool("z-linux-copy", &pool("linux", 4, "1d", "10m"));
    env.write_pool("lin", &pool("lin", 1, "1d", "10m"));
    let files = eventually("the three newcomers are refused", LIMIT, || async {
        let f = env.ctx.ports.store.file_errors().await.unwrap();
        (f.len() == 3).then_some(f)
    })
    .await;
    for f in &files {
        assert!(!f.path.ends_with("/linux.yaml"), "the owner is never blamed: {f:?}");
    }
    assert!(files.iter().any(|f| f.path.ends_with("a-linux-copy.yaml") && f.message.contains("belongs to")));
    assert!(files.iter().any(|f| f.path.ends_with("lin.yaml") && f.message.contains("one is a prefix")));
    rounds(2).await;
    assert!(
        env.inserts().keys().all(|h| !h.starts_with("linux-2-") && !h.starts_with("linux-3-")),
        "the live pool never grew"
    );
    assert_eq!(env.ctx.ports.store.config("linux").await.unwrap().unwrap().value.current_amount, 2);
    assert!(env.ctx.ports.store.config("lin").await.unwrap().is_none());
    env.converged("linux", 2).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_amount_is_refused_and_creation_is_bounded_and_stops_when_the_amount_drops() {
    let mut s = settings();
    s.limits = Limits { max_amount: 500, expand_batch: 10, creating_per_config: 20, ..Limits::default() };
    let env = Env::start_with(Backend::Redis, sim_config(), &[], true, s).await;
    env.write_pool("linux", &pool("linux", 10_000_000, "1d", "10m"));
    eventually("the file is refused", LIMIT, || async {
        let f = env.ctx.ports.store.file_errors().await.unwrap();
        f.first().filter(|e| e.message.contains("max_amount 500")).map(drop)
    })
    .await;
    assert!(env.ctx.ports.store.config("linux").await.unwrap().is_none());
    let (_, out, _) = cli(&env, &["recover", "queues", "list"]);
    let queues: Value = serde_json::from_str(&out).unwrap();
    assert!(env.vms("linux").await.is_empty(), "no VM record made");
    for q in ["create_vm", "create_instance", "bulk_insert"] {
        assert_eq!(queues[q]["pushed"].as_u64().unwrap_or(0), 0, "Redis untouched: {queues}");
    }

    env.write_pool("linux", &pool("linux", 500, "1d", "10m"));
    eventually("creation starts", LIMIT, || async { (!env.vms("linux").await.is_empty()).then_some(()) })
        .await;
    let uncreated =
        env.ctx.ports.store.vm_ids(gce_backend_jobs::ports::store::VmIndex::Uncreated).await.unwrap();
    assert!(
        uncreated.len() <= 20 + 10,
        "at most creating_per_config wait for an instance: {}",
        uncreated.len()
    );
    env.write_pool("linux", &pool("linux", 3, "1d", "10m"));
    env.converged("linux", 3).await;
    let inserted = env.inserts().len();
    assert!(inserted < 200, "creation stopped when the amount dropped: {inserted} of 500 inserted");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_instance_is_replaced_at_once_without_waiting_for_the_timeout() {
    let env =
        Env::start(Backend::Redis, sim_config(), &[("linux", pool("linux", 2, "1d", "10m"))], true).await;
    env.converged("linux", 2).await;
    let victim = env.vms("linux").await.into_iter().find(|v| v.id == "linux-0").unwrap();
    let r = reqwest::Client::new()
        .post(format!("{}/sim/preempt", env.sim_url))
        .json(&json!({"project": "my-proj", "zone": "us-central1-b", "name": victim.hostname}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let next = eventually("linux-0 runs a new incarnation with a connected bot", LIMIT, || async {
        let vm = env.ctx.ports.store.vm("linux-0").await.unwrap()?.value;
        (vm.hostname != victim.hostname && vm.connected.is_some()).then_some(vm.hostname)
    })
    .await;
    assert!(!env.instances("linux").contains_key(&victim.hostname), "the stopped instance was deleted");
    assert!(env.instances("linux").contains_key(&next));
    let errors = env.ctx.ports.store.errors("linux").await.unwrap();
    let e = errors.iter().find(|e| e.code == "instance_down").expect("the fault is on the Config's status");
    // Seen while it stops or once stopped: both are the preemption's, and both replace it.
    let state = ["STOPPING", "TERMINATED"].iter().any(|s| e.message.contains(s));
    assert!(e.message.contains(&victim.hostname) && state, "{e:?}");
    env.converged("linux", 2).await;
    let c = env.counts("linux").await;
    assert_eq!((c.connected, c.dead, c.unhealthy), (2, 0, 0));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_cli_names_queues_finds_tasks_by_key_and_refuses_what_does_not_exist() {
    let env = Env::start(Backend::Redis, sim_config(), &[], false).await;
    let (code, out, _) = cli(&env, &["recover", "queues", "list"]);
    assert_eq!(code, 0);
    let list: Value = serde_json::from_str(&out).unwrap();
    assert!(list["manage_bot"]["pending"].is_u64() && list["inspect_instances"].is_object(), "{list}");
    let (code, _, err) = cli(&env, &["recover", "queues", "--queue", "typo", "counts"]);
    assert_eq!(code, 2);
    assert!(err.contains("no queue \"typo\""), "{err}");
    let (code, _, err) = cli(&env, &["recover", "queues", "--queue", "manage_bot", "retry-dead", "12345"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = cli(&env, &["recover", "queues", "--queue", "manage_bot", "status", "12345"]);
    assert_eq!(code, 2);
    // Tasks an operator knows by key, due and delayed, then purged.
    let q = env.ctx.queues.get("manage_bot");
    q.push("linux-3", &json!({"id": "linux-3"}), gce_backend_queues::When::Now).await.unwrap();
    q.push("linux-4", &json!({"id": "linux-4"}), gce_backend_queues::When::After(Duration::from_secs(600)))
        .await
        .unwrap();
    let (code, out, _) =
        cli(&env, &["recover", "queues", "--queue", "manage_bot", "status", "--key", "linux-3"]);
    assert_eq!(code, 0);
    let st: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((st["key"].as_str(), st["state"].as_str()), (Some("linux-3"), Some("pending")));
    let (_, out, _) = cli(&env, &["recover", "queues", "--queue", "manage_bot", "pending"]);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()[0]["key"], "linux-3");
    let (_, out, _) = cli(&env, &["recover", "queues", "--queue", "manage_bot", "delayed"]);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()[0]["key"], "linux-4");
    let (code, out, _) = cli(&env, &["recover", "queues", "--queue", "manage_bot", "purge-pending"]);
    assert_eq!((code, out.trim()), (0, "{\n  \"purged\": 2\n}"));
    let (code, _, _) =
        cli(&env, &["recover", "queues", "--queue", "manage_bot", "status", "--key", "linux-3"]);
    assert_eq!(code, 2, "gone");
    // A closed pipe ends the output quietly (the reader is gone before anything is written).
    let url = env._redis.as_ref().unwrap().url();
    let sh = format!(
        "set -o pipefail; {} recover --redis {url} --namespace {DEPLOYMENT} queues list | true",
        crate::support::BIN
    );
    let out = Command::new("bash").args(["-c", &sh]).output().unwrap();
    assert!(out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("panicked"), "{out:?}");
    // Nothing but the prices in force (the dated snapshot until the catalog is read).
    let st = status(&env);
    assert_eq!((&st["configs"], &st["files"]), (&json!([]), &json!([])), "{st}");
    assert!(st["prices"]["source"].as_str().is_some_and(|s| s.starts_with("snapshot ")), "{st}");
    env.stop().await;
}
