//! `gce-backend run --role workers` stopped with SIGTERM mid-batch, as an orchestrator stops a
//! pod: a batch of `report_quota` tasks (one Compute call each, held silent through the
//! simulator's faults), SIGTERM while two run and six wait in the worker's buffer, then a second
//! worker. What is checked is the queue's record in Redis and the calls the simulator answered:
//! the process exits 0 before the test would kill it, no task is lost, and a task runs twice only
//! if it was in flight at the stop and handed back.

use std::collections::BTreeSet;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use crate::support::{Procs, lines, terminate, wait_for};
use gce_backend_jobs::tasks::ReportQuota;
use gce_backend_queues::testing::eventually;
use gce_backend_queues::{Queue, TaskStatus, When};

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
/// for SIGTERM), and its standard output's lines; its log dropped.
fn worker(procs: &Procs) -> (Child, Receiver<String>) {
    let mut c = procs.command();
    c.args(["--role", "workers"]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let out = lines(child.stdout.take().unwrap());
    wait_for(&out, "running (configs in");
    (child, out)
}

/// Makes Compute silent (`true`: every call waits, unanswered) or speak again.
fn compute_hang(procs: &Procs, hang: bool) {
    procs.sim.with(|w| w.faults.compute_hang = hang);
}

/// `compute.regions.list` calls (`report_quota`'s one call) the simulator answered 200.
fn quota_reads(procs: &Procs) -> u64 {
    procs.sim.with(|w| w.calls.get("compute.regions.list").and_then(|by| by.get(&200)).copied().unwrap_or(0))
}

/// Waits until the worker holds the whole batch and [`CONCURRENCY`] of its runs have started,
/// their Compute call held silent (so a stop now finds runs in flight, not only a buffer).
async fn running_in(procs: &Procs, q: &Queue) {
    eventually("the worker holds the batch, two runs started", Duration::from_secs(60), || async {
        let held = procs.sim.with(|w| w.held_silent);
        (q.counts().await.unwrap().running == TASKS as u64 && held == CONCURRENCY).then_some(())
    })
    .await;
}

/// Pushes the batch: one task per project; returns their ids.
async fn push(q: &Queue) -> Vec<String> {
    let tasks: Vec<(String, ReportQuota)> =
        (0..TASKS).map(|n| (format!("p-{n}"), ReportQuota { project: format!("p-{n}") })).collect();
    let out = q.push_many(tasks.iter().map(|(k, t)| (k.clone(), t)), When::Now).await.unwrap();
    out.iter().map(|o| o.task_id().to_owned()).collect()
}

/// Waits for `child`, told to stop, which must exit 0 within [`KILL_AFTER`] (else it is killed
/// and the test fails).
async fn exits_0(child: &mut Child) {
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
    // Compute silent until the stop is under way: the two runs started end only after it.
    compute_hang(&procs, true);
    let ids = push(q).await;

    let (mut first, out) = worker(&procs);
    running_in(&procs, q).await;
    terminate(first.id());
    wait_for(&out, "stopping:");
    compute_hang(&procs, false);
    exits_0(&mut first).await;

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

    let (second, _) = worker(&procs);
    eventually("every task is done", Duration::from_secs(60), || async {
        (q.counts().await.unwrap().done == TASKS as u64).then_some(())
    })
    .await;
    for st in statuses(q, &ids).await {
        let by_first = done_first.contains(&st.task_id);
        assert_eq!(st.state, "completed", "{st:?}");
        assert_eq!(runs(&st, first.id()), [(1, Some("done"), by_first)], "each task run once: {st:?}");
    }
    assert_eq!(quota_reads(&procs), TASKS as u64, "one quota read per task");
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
    compute_hang(&procs, true);
    let ids = push(q).await;

    let (mut first, _) = worker(&procs);
    running_in(&procs, q).await;
    terminate(first.id());
    exits_0(&mut first).await;

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

    compute_hang(&procs, false);
    let (second, _) = worker(&procs);
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
    let reads = quota_reads(&procs);
    assert!((TASKS as u64..=(TASKS + CONCURRENCY) as u64).contains(&reads), "{reads} quota reads");
    let c = q.counts().await.unwrap();
    assert_eq!((c.running, c.pending, c.expired, c.dead), (0, 0, 0, 0), "{c:?}");
    procs.stop(&mut [second]);
}
