//! Worker processes on a private Redis: the queues crate's demo example (`--role work`) killed
//! with SIGKILL mid-run and stopped with SIGTERM, and `gce-backend run --role workers` stopped
//! with SIGTERM mid-batch (`graceful_stop.rs`): runs in flight finish within the stop's grace,
//! or are handed back past it; either way it exits 0 and every task runs to done once more at
//! most.

mod graceful_stop;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gce_backend_queues::testing::{RedisServer, eventually};
use gce_backend_queues::{Policy, Queue, QueueSpec, RedisEngine, When};
use serde::Serialize;

const LEASE_MS: u64 = 1500;

/// The demo's payload (`queues/examples/demo.rs`).
#[derive(Serialize)]
struct DemoTask {
    n: u64,
    ms: u64,
}

/// The demo example's binary, beside the binary under test (same target directory and profile),
/// built by cargo once per test run (a no-op when it is up to date).
fn demo_bin() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let profile_dir = PathBuf::from(crate::support::BIN).parent().unwrap().to_owned();
        let target = profile_dir.parent().unwrap();
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "--quiet", "--locked", "-p", "gce-backend-queues", "--example", "demo"]);
        build.arg("--target-dir").arg(target).current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.ends_with("release") {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo");
        assert!(status.success(), "cargo build --example demo: {status}");
        profile_dir.join("examples").join("demo")
    })
}

fn worker_process(server: &RedisServer, ns: &str, concurrency: usize) -> Child {
    Command::new(demo_bin())
        .args(["--role", "work", "--redis", &server.url(), "--namespace", ns])
        .args(["--concurrency", &concurrency.to_string(), "--lease-ms", &LEASE_MS.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gce-backend")
}

async fn demo_queue(server: &RedisServer, ns: &str) -> Queue {
    let engine = RedisEngine::connect(&server.url(), ns).await.unwrap();
    let policy = Policy { lease: Duration::from_millis(LEASE_MS), ..Policy::default() };
    Queue::new(Arc::new(engine), QueueSpec::new("demo", policy).unwrap())
}

async fn push(q: &Queue, n: u64, ms: u64) -> Vec<String> {
    let tasks: Vec<(String, DemoTask)> = (0..n).map(|n| (format!("demo-{n}"), DemoTask { n, ms })).collect();
    let out = q.push_many(tasks.iter().map(|(k, t)| (k.clone(), t)), When::Now).await.unwrap();
    out.iter().map(|o| o.task_id().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_a_worker_killed_mid_run_complete_in_another_process_after_the_lease() {
    let server = RedisServer::start();
    let q = demo_queue(&server, "kill").await;
    let ids = push(&q, 40, 400).await;

    let mut first = worker_process(&server, "kill", 4);
    let first_prefix = format!("-{}-demo-", first.id());
    eventually("the first process is mid-run", Duration::from_secs(30), || async {
        let c = q.counts().await.unwrap();
        (c.done >= 4 && c.running >= 4).then_some(())
    })
    .await;
    first.kill().unwrap(); // SIGKILL: no shutdown, no acks, no releases
    first.wait().unwrap();
    let mut orphans = Vec::new();
    for id in &ids {
        let st = q.status(id).await.unwrap().unwrap();
        if st.state == "running" {
            orphans.push(id.clone());
        }
    }
    assert!(!orphans.is_empty(), "the killed process held tasks");

    let mut second = worker_process(&server, "kill", 4);
    let second_prefix = format!("-{}-demo-", second.id());
    eventually("every task completes", Duration::from_secs(60), || async {
        (q.counts().await.unwrap().done == 40).then_some(())
    })
    .await;
    let c = q.counts().await.unwrap();
    assert_eq!((c.done, c.dead, c.failed, c.pending, c.running), (40, 0, 0, 0, 0));
    assert!(c.expired >= orphans.len() as u64);
    for id in &orphans {
        let st = q.status(id).await.unwrap().unwrap();
        assert_eq!(st.state, "completed", "orphan {id}");
        let runs = &st.runs;
        assert_eq!(runs.len(), 2, "orphan {id}: one run per process");
        assert!(runs[0].worker_id.contains(&first_prefix), "{runs:?}");
        assert_eq!(runs[0].outcome.as_deref(), Some("lease-expired"));
        assert!(runs[1].worker_id.contains(&second_prefix), "{runs:?}");
        assert_eq!(runs[1].outcome.as_deref(), Some("done"));
    }
    second.kill().unwrap();
    second.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_running_tasks_finish_and_puts_the_rest_back() {
    let server = RedisServer::start();
    let q = demo_queue(&server, "term").await;
    push(&q, 40, 500).await;
    let mut worker = worker_process(&server, "term", 2);
    eventually("the worker is running two tasks", Duration::from_secs(30), || async {
        (q.counts().await.unwrap().running >= 2).then_some(())
    })
    .await;
    let status = Command::new("kill").args(["-TERM", &worker.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = worker.wait().unwrap();
    assert!(exit.success(), "graceful exit, got {exit}");
    let c = q.counts().await.unwrap();
    assert_eq!(c.running, 0, "nothing is left leased to the stopped worker");
    assert!(c.done >= 2, "tasks in flight finished");
    assert_eq!(c.done + c.pending, 40, "the rest is back in the queue, none lost");
    assert_eq!((c.dead, c.expired), (0, 0));
}
