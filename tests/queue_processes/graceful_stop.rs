//! `gce-backend run --role workers` stopped with SIGTERM mid-batch, as an orchestrator stops a
//! pod: a batch of `report_quota` tasks (one Compute call each, made slow or silent through the
//! simulator's faults), SIGTERM while two run and six wait in the worker's buffer, then a second
//! worker. What is checked is the queue's record in Redis and the calls the simulator answered:
//! the process exits 0 before the test would kill it, no task is lost, and a task runs twice only
//! if it was in flight at the stop and handed back.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use gce_backend_jobs::tasks::ReportQuota;
use gce_backend_queues::testing::eventually;
use gce_backend_queues::{Queue, TaskStatus, When};
use serde_json::{Value, json};

use crate::support::{Procs, terminate, wait_for};

/// Tasks in the batch; the worker runs [`CONCURRENCY`] at once and holds the rest in its buffer
/// (one take of up to the queue's `batch`, 32).
const TASKS: usize = 8;
/// Tasks each queue's worker runs at once.
const CONCURRENCY: usize = 2;
/// How long the test gives a stopped process before it kills it (an orchestrator's grace).
const KILL_AFTER: Duration = Duration::from_secs(30);

/// The processes, Redis and the simulator, with the settings' `stop_grace` set to `grace`.
async fn start(grace: &str) -> Procs {
    let procs = Procs::start(CONCURRENCY, "").await;
    let text = std::fs::read_to_string(&procs.settings).unwrap();
    std::fs::write(&procs.settings, format!("stop_grace = \"{grace}\"\n{text}")).unwrap();
    procs
}

/// A workers-only process (no cron: only the test pushes), once it says it runs (so it listens
/// for SIGTERM); its log dropped.
fn worker(procs: &Procs) -> Child {
    let mut c = procs.command();
    c.args(["--role", "workers"]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    wait_for(&rx, "running (configs in");
    child
}

/// Sets the simulator's faults through its admin API.
async fn faults(procs: &Procs, body: Value) {
    let r = reqwest::Client::new()
        .post(format!("http://{}/sim/faults", procs.addr))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
}

/// `compute.regions.list` calls (`report_quota`'s one call) the simulator answered 200.
async fn quota_reads(procs: &Procs) -> u64 {
    let calls: Value =
        reqwest::get(format!("http://{}/sim/calls", procs.addr)).await.unwrap().json().await.unwrap();
    calls["calls"]["compute.regions.list"]["200"].as_u64().unwrap_or(0)
}

/// Pushes the batch: one task per project; returns their ids.
async fn push(q: &Queue) -> Vec<String> {
    let tasks: Vec<(String, ReportQuota)> =
        (0..TASKS).map(|n| (format!("p-{n}"), ReportQuota { project: format!("p-{n}") })).collect();
    let out = q.push_many(tasks.iter().map(|(k, t)| (k.clone(), t)), When::Now).await.unwrap();
    out.iter().map(|o| o.task_id().to_owned()).collect()
}

/// SIGTERM to `child`, which must exit 0 within [`KILL_AFTER`] (else it is killed and the test
/// fails).
async fn stop(child: &mut Child) {
    terminate(child.id());
    let kill_at = tokio::time::Instant::now() + KILL_AFTER;
    let exited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if tokio::time::Instant::now() >= kill_at {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the stopped worker had not exited after {KILL_AFTER:?}: killed");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exited.success(), "a stopped worker exits 0, got {exited}");
}

/// Every task's status, in push order.
async fn statuses(q: &Queue, ids: &[String]) -> Vec<TaskStatus> {
    let mut out = Vec::new();
    for id in ids {
        out.push(q.status(id).await.unwrap().expect("a task's record is kept"));
    }
    out
}

/// A run as (run number, outcome, whether the process `pid` ran it).
fn runs(st: &TaskStatus, pid: u32) -> Vec<(u32, Option<&str>, bool)> {
    let by = format!("-{pid}-report_quota-");
    st.runs.iter().map(|r| (r.run_id, r.outcome.as_deref(), r.worker_id.contains(&by))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_batch_finishes_the_runs_in_flight_and_releases_the_rest() {
    let procs = start("20s").await;
    let ctx = procs.ctx().await;
    let q = ctx.queues.get("report_quota");
    faults(&procs, json!({"latency_ms": {"compute.regions.list": 3000}})).await;
    let ids = push(q).await;

    let mut first = worker(&procs);
    eventually("the first worker holds the batch", Duration::from_secs(30), || async {
        (q.counts().await.unwrap().running == TASKS as u64).then_some(())
    })
    .await;
    stop(&mut first).await;

    // The two runs in flight finished within the grace; the six waiting were put back, unrun.
    let c = q.counts().await.unwrap();
    assert_eq!((c.running, c.done, c.pending, c.expired, c.dead), (0, 2, 6, 0, 0), "{c:?}");
    let mut done_first = BTreeSet::new();
    for st in statuses(q, &ids).await {
        match st.state.as_str() {
            "completed" => {
                assert_eq!(runs(&st, first.id()), [(1, Some("done"), true)], "{st:?}");
                done_first.insert(st.task_id);
            }
            "pending" => assert!(st.runs.is_empty(), "a released task has no run: {st:?}"),
            _ => panic!("neither done nor back in the queue: {st:?}"),
        }
    }

    let second = worker(&procs);
    eventually("every task is done", Duration::from_secs(60), || async {
        (q.counts().await.unwrap().done == TASKS as u64).then_some(())
    })
    .await;
    for st in statuses(q, &ids).await {
        let by_first = done_first.contains(&st.task_id);
        assert_eq!(st.state, "completed", "{st:?}");
        assert_eq!(runs(&st, first.id()), [(1, Some("done"), by_first)], "each task run once: {st:?}");
    }
    assert_eq!(quota_reads(&procs).await, TASKS as u64, "one quota read per task");
    let c = q.counts().await.unwrap();
    assert_eq!((c.running, c.pending, c.expired, c.dead), (0, 0, 0, 0), "{c:?}");
    procs.stop(&mut [second]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_past_the_grace_hands_back_the_runs_cut_short_and_exits_0() {
    let procs = start("1s").await;
    let ctx = procs.ctx().await;
    let q = ctx.queues.get("report_quota");
    // Compute is silent: the two runs started never end on their own.
    faults(&procs, json!({"compute_hang": true})).await;
    let ids = push(q).await;

    let mut first = worker(&procs);
    eventually("the first worker holds the batch", Duration::from_secs(30), || async {
        (q.counts().await.unwrap().running == TASKS as u64).then_some(())
    })
    .await;
    let held: BTreeSet<String> =
        statuses(q, &ids).await.into_iter().filter(|st| st.state == "running").map(|st| st.task_id).collect();
    stop(&mut first).await;

    // Nothing acknowledged as done, nothing left leased: the two runs cut short are handed back
    // (kept in their status), the six not started released (no run).
    let c = q.counts().await.unwrap();
    assert_eq!((c.running, c.done, c.pending, c.expired, c.dead), (0, 0, TASKS as u64, 0, 0), "{c:?}");
    let mut handed_back = BTreeSet::new();
    for st in statuses(q, &ids).await {
        assert_eq!((st.state.as_str(), st.attempts), ("pending", 0), "{st:?}");
        match runs(&st, first.id()).as_slice() {
            [] => {}
            [(1, Some("handed-back"), true)] => {
                handed_back.insert(st.task_id);
            }
            r => panic!("neither handed back nor released: {r:?} {st:?}"),
        }
    }
    assert_eq!(handed_back.len(), CONCURRENCY, "the runs in flight: {handed_back:?}");
    assert!(handed_back.is_subset(&held), "handed back only what the worker held");

    faults(&procs, json!({"compute_hang": false})).await;
    let second = worker(&procs);
    eventually("every task is done", Duration::from_secs(60), || async {
        (q.counts().await.unwrap().done == TASKS as u64).then_some(())
    })
    .await;
    // Each task done once, by the second worker; a handed-back one after its cut run.
    for st in statuses(q, &ids).await {
        assert_eq!(st.state, "completed", "{st:?}");
        let expected: &[_] = match handed_back.contains(&st.task_id) {
            true => &[(1, Some("handed-back"), true), (2, Some("done"), false)],
            false => &[(1, Some("done"), false)],
        };
        assert_eq!(runs(&st, first.id()), expected, "{st:?}");
    }
    // One quota read per task; a cut call may still be answered once Compute speaks again.
    let reads = quota_reads(&procs).await;
    assert!((TASKS as u64..=(TASKS + CONCURRENCY) as u64).contains(&reads), "{reads} quota reads");
    let c = q.counts().await.unwrap();
    assert_eq!((c.running, c.pending, c.expired, c.dead), (0, 0, 0, 0), "{c:?}");
    procs.stop(&mut [second]);
}
