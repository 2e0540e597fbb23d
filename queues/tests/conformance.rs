//! Conformance suite: the same queue semantics checked against the in-memory engine and the Redis
//! engine (each Redis test starts its own `redis-server` on a free loopback port).

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apalis::prelude::*;
use chrono::Utc;
use gce_backend_queues::engine::{Ack, PushItem, Resolution};
use gce_backend_queues::testing::{RedisServer, eventually, stoppable};
use gce_backend_queues::{
    DeadSelection, Engine, MemoryEngine, Policy, PushOutcome, Queue, QueueSpec, RedisEngine, When, WorkerId,
    outcome,
};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// The payload every test pushes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Job {
    n: u64,
}

struct Harness {
    engine: Arc<dyn Engine>,
    _redis: Option<RedisServer>,
}

impl Harness {
    fn memory() -> Self {
        Self { engine: Arc::new(MemoryEngine::new()), _redis: None }
    }

    async fn redis() -> Self {
        let server = RedisServer::start();
        let engine = RedisEngine::connect(&server.url(), "test").await.unwrap();
        Self { engine: Arc::new(engine), _redis: Some(server) }
    }

    fn queue(&self, policy: Policy) -> Queue {
        Queue::new(self.engine.clone(), QueueSpec::new("jobs", policy).unwrap())
    }
}

fn fast() -> Policy {
    Policy {
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(100),
        lease: Duration::from_secs(2),
        ..Policy::default()
    }
}

fn worker(id: &str) -> WorkerId {
    WorkerId { group: "host-a".into(), id: id.into() }
}

/// Runs an apalis worker over `queue` until the sender fires or is dropped.
fn spawn_worker<H, Fut>(
    queue: &Queue,
    name: &str,
    concurrency: usize,
    handler: H,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>)
where
    H: Fn(Job) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxDynError>> + Send + 'static,
{
    let worker = WorkerBuilder::new(name)
        .backend(queue.backend::<Job>("host-a"))
        .concurrency(concurrency)
        .build(handler);
    let (stop, handle) = stoppable(|stop| worker.run_until(stop));
    (stop, tokio::spawn(async move { handle.await.unwrap().expect("worker ended with an error") }))
}

/// Takes up to `max` tasks and ends run `i` with `resolution(i)`; returns their ids.
async fn take_and_resolve(
    h: &Harness,
    q: &Queue,
    max: usize,
    resolution: impl Fn(usize) -> Resolution,
) -> Vec<String> {
    let taken = h.engine.take(q.spec(), &worker("w"), max).await.unwrap().tasks;
    let acks: Vec<Ack> = taken
        .iter()
        .enumerate()
        .map(|(i, l)| Ack { id: l.id.clone(), token: l.token.clone(), resolution: resolution(i) })
        .collect();
    assert_eq!(h.engine.finish(q.spec(), &acks).await.unwrap(), 0);
    taken.into_iter().map(|l| l.id).collect()
}

async fn done_count(q: &Queue, n: u64) -> Option<()> {
    (q.counts().await.unwrap().done >= n).then_some(())
}

const LONG: Duration = Duration::from_secs(60);

// ---- a. keyed push -------------------------------------------------------------------------

async fn keyed_push_dedupes_pending_and_keeps_one_follow_up(h: &Harness) {
    let q = h.queue(fast());
    let first = q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap();
    assert!(matches!(first, PushOutcome::Enqueued(_)));
    let again = q.push("vm-1", &Job { n: 2 }, When::Now).await.unwrap();
    assert_eq!(again, PushOutcome::AlreadyPending(first.task_id().into()));
    assert_eq!(q.counts().await.unwrap().pending, 1);

    let taken = h.engine.take(q.spec(), &worker("w1"), 10).await.unwrap();
    assert_eq!(taken.tasks.len(), 1);
    assert_eq!(taken.tasks[0].payload, r#"{"n":1}"#, "the first push's payload, not the no-op's");
    let lease = &taken.tasks[0];

    let during = q.push("vm-1", &Job { n: 3 }, When::Now).await.unwrap();
    assert_eq!(during, PushOutcome::FollowUp(lease.id.clone()));
    let during2 = q.push("vm-1", &Job { n: 4 }, When::Now).await.unwrap();
    assert_eq!(during2, PushOutcome::FollowUpAlreadyPending(lease.id.clone()));
    assert!(q.status(&lease.id).await.unwrap().unwrap().follow_up);

    let ack = Ack { id: lease.id.clone(), token: lease.token.clone(), resolution: Resolution::Done };
    assert_eq!(h.engine.finish(q.spec(), &[ack]).await.unwrap(), 0);
    assert_eq!(q.status(&lease.id).await.unwrap().unwrap().state, "completed");
    let next = q.live("vm-1").await.unwrap().expect("the follow-up is pending");
    assert_ne!(next.task_id, lease.id);
    assert_eq!(next.state, "pending");
    let taken = h.engine.take(q.spec(), &worker("w1"), 10).await.unwrap();
    assert_eq!(taken.tasks[0].payload, r#"{"n":3}"#, "the change made during the run survives");
    // Other keys are independent.
    assert!(matches!(q.push("vm-2", &Job { n: 5 }, When::Now).await.unwrap(), PushOutcome::Enqueued(_)));
}

async fn follow_up_merges_into_a_retrying_task(h: &Harness) {
    let q = h.queue(fast());
    q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap();
    let l = h.engine.take(q.spec(), &worker("w1"), 1).await.unwrap().tasks.remove(0);
    q.push("vm-1", &Job { n: 2 }, When::Now).await.unwrap();
    let retry = Resolution::Retry { after: Duration::from_secs(30), error: "503".into() };
    h.engine.finish(q.spec(), &[Ack { id: l.id.clone(), token: l.token, resolution: retry }]).await.unwrap();
    let st = q.status(&l.id).await.unwrap().unwrap();
    assert_eq!((st.state.as_str(), st.attempts, st.follow_up), ("pending", 1, false));
    // The follow-up was due now, so the merged task is due now with the newer payload.
    let again = h.engine.take(q.spec(), &worker("w1"), 1).await.unwrap().tasks;
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].id.as_str(), again[0].attempt), (l.id.as_str(), 2));
    assert_eq!(again[0].payload, r#"{"n":2}"#);
}

// ---- b. delayed tasks ----------------------------------------------------------------------

async fn delayed_tasks_wait_for_their_time(h: &Harness) {
    let q = h.queue(fast());
    q.push("later", &Job { n: 1 }, When::After(LONG)).await.unwrap();
    q.push("soon", &Job { n: 2 }, When::After(Duration::from_millis(200))).await.unwrap();
    let at = Utc::now() + chrono::Duration::milliseconds(300);
    q.push("at", &Job { n: 3 }, When::At(at)).await.unwrap();
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.delayed), (0, 3));
    let taken = h.engine.take(q.spec(), &worker("w1"), 10).await.unwrap();
    assert!(taken.tasks.is_empty(), "nothing is due yet");
    assert!(taken.next_due.unwrap() <= Duration::from_millis(200));

    let got = Arc::new(Mutex::new(Vec::new()));
    eventually("both short delays come due", Duration::from_secs(10), || {
        let (e, s, got) = (h.engine.clone(), q.spec().clone(), got.clone());
        async move {
            let keys = e.take(&s, &worker("w1"), 10).await.unwrap().tasks.into_iter().map(|t| t.key);
            let mut got = got.lock().unwrap();
            got.extend(keys);
            (got.len() >= 2).then_some(())
        }
    })
    .await;
    let mut got = got.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, ["at", "soon"]);
    let at_run = q.live("at").await.unwrap().unwrap();
    assert!(at_run.runs[0].started >= at - chrono::Duration::milliseconds(5), "not started before its time");
    assert_eq!(q.counts().await.unwrap().delayed, 1, "the 60 s task still waits");
    assert_eq!(q.live("later").await.unwrap().unwrap().state, "pending");
}

// ---- c. leases -----------------------------------------------------------------------------

async fn expired_lease_is_delivered_again_to_any_worker(h: &Harness) {
    let q = h.queue(Policy { lease: Duration::from_millis(500), ..fast() });
    q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap();
    let dead_worker = h.engine.take(q.spec(), &worker("crashed"), 1).await.unwrap().tasks.remove(0);
    assert_eq!(q.counts().await.unwrap().running, 1);
    let nothing = h.engine.take(q.spec(), &worker("other-name"), 1).await.unwrap();
    assert!(nothing.tasks.is_empty(), "a live lease is not handed out twice");

    let again =
        eventually("the lease expires and another worker gets the task", Duration::from_secs(10), || {
            let (e, s) = (h.engine.clone(), q.spec().clone());
            async move { e.take(&s, &worker("other-name"), 1).await.unwrap().tasks.pop() }
        })
        .await;
    assert_eq!((again.id.as_str(), again.attempt), (dead_worker.id.as_str(), 2));
    let st = q.status(&again.id).await.unwrap().unwrap();
    assert_eq!(st.runs.len(), 2);
    assert_eq!(st.runs[0].worker_id, "crashed");
    assert_eq!(st.runs[0].outcome.as_deref(), Some("lease-expired"));
    assert_eq!(st.runs[1].worker_id, "other-name");
    assert!(st.taken_until.is_some());
    assert_eq!(q.counts().await.unwrap().expired, 1);

    // The crashed worker's late ack is refused; the new holder's is taken.
    let late = Ack { id: dead_worker.id.clone(), token: dead_worker.token, resolution: Resolution::Done };
    assert_eq!(h.engine.finish(q.spec(), &[late]).await.unwrap(), 1);
    assert_eq!(q.status(&again.id).await.unwrap().unwrap().state, "running");
    let ok = Ack { id: again.id.clone(), token: again.token, resolution: Resolution::Done };
    assert_eq!(h.engine.finish(q.spec(), &[ok]).await.unwrap(), 0);
    assert_eq!(q.status(&again.id).await.unwrap().unwrap().state, "completed");
}

async fn renewed_lease_is_kept(h: &Harness) {
    let q = h.queue(Policy { lease: Duration::from_millis(600), ..fast() });
    q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap();
    let l = h.engine.take(q.spec(), &worker("alive"), 1).await.unwrap().tasks.remove(0);
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let lost = h.engine.renew(q.spec(), &[(l.id.clone(), l.token.clone())]).await.unwrap();
        assert!(lost.is_empty());
        assert!(h.engine.take(q.spec(), &worker("thief"), 1).await.unwrap().tasks.is_empty());
    }
    let lost = h.engine.renew(q.spec(), &[("nope".into(), "x".into())]).await.unwrap();
    assert_eq!(lost, ["nope"]);
}

async fn handler_stuck_past_its_timeout_gives_the_task_back(h: &Harness) {
    // The worker process stays alive, but its handler hangs: past `timeout` the lease is no
    // longer renewed, so the task is delivered again (here to the same worker's next slot).
    let q =
        h.queue(Policy { lease: Duration::from_millis(600), timeout: Duration::from_millis(300), ..fast() });
    let runs = Arc::new(AtomicU32::new(0));
    let r = runs.clone();
    let (stop, handle) = spawn_worker(&q, "hangs-once", 4, move |_job: Job| {
        let r = r.clone();
        async move {
            if r.fetch_add(1, Ordering::SeqCst) == 0 {
                futures::future::pending::<()>().await;
            }
            Ok(())
        }
    });
    let id = q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap().task_id().to_owned();
    eventually("the task completes on its second run", Duration::from_secs(15), || done_count(&q, 1)).await;
    let st = q.status(&id).await.unwrap().unwrap();
    assert_eq!(st.state, "completed");
    assert_eq!(st.runs[0].outcome.as_deref(), Some("lease-expired"));
    assert_eq!(st.attempts, 2);
    drop(stop);
    handle.abort();
}

// ---- d. retries and the dead set -----------------------------------------------------------

async fn failing_task_backs_off_then_goes_dead_with_its_last_error(h: &Harness) {
    let q = h.queue(Policy { max_attempts: 3, ..fast() });
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let (stop, handle) = spawn_worker(&q, "w", 2, move |job: Job| {
        let c = c.clone();
        async move {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            Err(format!("boom {} #{n}", job.n).into())
        }
    });
    let id = q.push("vm-1", &Job { n: 7 }, When::Now).await.unwrap().task_id().to_owned();
    eventually("the task goes dead", Duration::from_secs(15), || async {
        (q.counts().await.unwrap().dead == 1).then_some(())
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 3, "max_attempts runs, no more");
    let st = q.status(&id).await.unwrap().unwrap();
    assert_eq!((st.state.as_str(), st.reason.as_str()), ("failed", "retries-exhausted"));
    assert_eq!((st.attempts, st.retries), (3, 0));
    assert_eq!(st.last_error.as_deref(), Some("boom 7 #3"));
    assert!(st.resolved.is_some());
    // Backoff: each retry started after the previous run ended.
    for pair in st.runs.windows(2) {
        // backoff_base 20 ms with equal jitter: at least 10 ms between a failure and its retry.
        assert!(pair[1].started >= pair[0].resolved.unwrap() + chrono::Duration::milliseconds(10));
        assert_eq!(pair[0].outcome.as_deref(), Some("retry"));
    }
    let c = q.counts().await.unwrap();
    assert_eq!((c.retried, c.failed, c.done, c.dead), (2, 1, 0, 1));
    assert_eq!(q.dead(10).await.unwrap()[0].task_id, id);
    drop(stop);
    handle.await.unwrap();
}

async fn permanent_errors_skip_retries_and_retry_after_is_honoured(h: &Harness) {
    let q = h.queue(Policy {
        max_attempts: 5,
        backoff_base: Duration::from_secs(60),
        backoff_cap: Duration::from_secs(60),
        ..fast()
    });
    let (stop, handle) = spawn_worker(&q, "w", 2, |job: Job| async move {
        match job.n {
            0 => Err(outcome::permanent("invalid request")),
            _ => Err(outcome::retry_after("rate limited", Duration::from_millis(50))),
        }
    });
    let perm = q.push("perm", &Job { n: 0 }, When::Now).await.unwrap().task_id().to_owned();
    let limited = q.push("limited", &Job { n: 1 }, When::Now).await.unwrap().task_id().to_owned();
    eventually("both are dead", Duration::from_secs(15), || async {
        (q.counts().await.unwrap().dead == 2).then_some(())
    })
    .await;
    let st = q.status(&perm).await.unwrap().unwrap();
    assert_eq!((st.reason.as_str(), st.attempts), ("permanent", 1));
    // With a 60 s backoff, 5 runs could only have happened through the 50 ms retry-after.
    let st = q.status(&limited).await.unwrap().unwrap();
    assert_eq!((st.reason.as_str(), st.attempts), ("retries-exhausted", 5));
    drop(stop);
    handle.await.unwrap();
}

async fn dead_tasks_can_be_listed_retried_and_purged(h: &Harness) {
    let q = h.queue(Policy { max_attempts: 1, ..fast() });
    let mut ids = Vec::new();
    for n in 0..4 {
        ids.push(q.push(&format!("vm-{n}"), &Job { n }, When::Now).await.unwrap().task_id().to_owned());
    }
    take_and_resolve(h, &q, 10, |_| Resolution::Retry { after: Duration::ZERO, error: "e".into() }).await;
    let dead = q.dead(10).await.unwrap();
    assert_eq!(dead.len(), 4);
    assert!(dead.windows(2).all(|w| w[0].resolved >= w[1].resolved), "newest first");

    assert_eq!(q.retry_dead(DeadSelection::One(ids[0].clone())).await.unwrap(), 1);
    let st = q.status(&ids[0]).await.unwrap().unwrap();
    assert_eq!((st.state.as_str(), st.attempts), ("pending", 0));
    assert_eq!(q.counts().await.unwrap().dead, 3);

    // A dead task whose key has a live task is superseded, not duplicated.
    q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap();
    assert_eq!(q.retry_dead(DeadSelection::One(ids[1].clone())).await.unwrap(), 1);
    assert_eq!(q.status(&ids[1]).await.unwrap().unwrap().reason, "superseded");

    assert_eq!(q.retry_dead(DeadSelection::All).await.unwrap(), 2);
    let c = q.counts().await.unwrap();
    assert_eq!((c.dead, c.pending), (0, 4));

    take_and_resolve(h, &q, 10, |_| Resolution::Fail { error: "x".into() }).await;
    assert_eq!(q.counts().await.unwrap().dead, 4);
    assert_eq!(q.purge_dead().await.unwrap(), 4);
    assert_eq!(q.counts().await.unwrap().dead, 0);
    assert!(q.status(&ids[2]).await.unwrap().is_none(), "purged records are gone");
}

// ---- e. pickup -----------------------------------------------------------------------------

async fn idle_worker_starts_a_newly_pushed_task(h: &Harness) {
    let q = h.queue(fast());
    let (stop, handle) = spawn_worker(&q, "idle", 4, |_job: Job| async { Ok(()) });
    // Idle for longer than the worker's longest block, so it is parked on the wait, not a poll.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let id = q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap().task_id().to_owned();
    eventually("the pushed task completes", Duration::from_secs(10), || done_count(&q, 1)).await;
    let st = q.status(&id).await.unwrap().unwrap();
    assert_eq!(st.state, "completed");
    assert_eq!(st.runs[0].worker_id, "idle");
    assert_eq!(st.runs[0].worker_group, "host-a");
    drop(stop);
    handle.await.unwrap();
}

// ---- f. backlogs ---------------------------------------------------------------------------

async fn backlog_of_50000_due_tasks_is_processed(h: &Harness) {
    const N: u64 = 50_000;
    let q = h.queue(Policy { batch: 100, ..fast() });
    // Pushed with a delay so all 50 000 are delayed, then due at the same moment.
    let jobs: Vec<(String, Job)> = (0..N).map(|n| (format!("vm-{n}"), Job { n })).collect();
    let out = q
        .push_many(jobs.iter().map(|(k, j)| (k.clone(), j)), When::After(Duration::from_millis(300)))
        .await
        .unwrap();
    assert!(out.iter().all(|o| matches!(o, PushOutcome::Enqueued(_))));
    assert_eq!(q.counts().await.unwrap().delayed, N);
    tokio::time::sleep(Duration::from_millis(400)).await;

    let seen = Arc::new(Mutex::new(HashSet::new()));
    let s = seen.clone();
    let (stop, handle) = spawn_worker(&q, "bulk", 32, move |job: Job| {
        let s = s.clone();
        async move {
            s.lock().unwrap().insert(job.n);
            Ok(())
        }
    });
    eventually("all 50 000 complete", Duration::from_secs(240), || done_count(&q, N)).await;
    let c = q.counts().await.unwrap();
    assert_eq!((c.done, c.failed, c.retried, c.dead, c.pending, c.delayed, c.running), (N, 0, 0, 0, 0, 0, 0));
    assert_eq!(seen.lock().unwrap().len() as u64, N, "every task ran");
    drop(stop);
    handle.await.unwrap();
}

// ---- h. graceful shutdown ------------------------------------------------------------------

async fn graceful_shutdown_finishes_in_flight_and_releases_the_rest(h: &Harness) {
    let q = h.queue(Policy { batch: 10, ..fast() });
    for n in 0..10 {
        q.push(&format!("vm-{n}"), &Job { n }, When::Now).await.unwrap();
    }
    let started = Arc::new(AtomicU32::new(0));
    let s = started.clone();
    let (stop, handle) = spawn_worker(&q, "w", 2, move |_job: Job| {
        let s = s.clone();
        async move {
            s.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(700)).await;
            Ok(())
        }
    });
    eventually("two tasks are running", Duration::from_secs(10), || {
        let s = started.clone();
        async move { (s.load(Ordering::SeqCst) == 2).then_some(()) }
    })
    .await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    let c = q.counts().await.unwrap();
    assert_eq!(started.load(Ordering::SeqCst), 2, "nothing new started after the stop");
    assert_eq!((c.done, c.running, c.pending, c.dead), (2, 0, 8, 0));
    let released = h.engine.take(q.spec(), &worker("next"), 10).await.unwrap().tasks;
    assert_eq!(released.len(), 8);
    assert!(released.iter().all(|l| l.attempt == 1), "a released task's attempt is not counted");
}

// ---- i. status -----------------------------------------------------------------------------

async fn counts_and_status_records_follow_each_state(h: &Harness) {
    let q = h.queue(Policy { deadline: Duration::from_secs(3600), ..fast() });
    let a = q.push("a", &Job { n: 1 }, When::Now).await.unwrap().task_id().to_owned();
    q.push("b", &Job { n: 2 }, When::Now).await.unwrap();
    q.push("c", &Job { n: 3 }, When::After(LONG)).await.unwrap();
    let st = q.status(&a).await.unwrap().unwrap();
    assert_eq!((st.state.as_str(), st.reason.as_str(), st.attempts, st.retries), ("pending", "none", 0, 5));
    assert_eq!(st.queue, "jobs");
    assert_eq!(st.key, "a");
    assert!(st.runs.is_empty() && st.taken_until.is_none() && st.run_at.is_some());
    let deadline = st.deadline.unwrap() - st.created;
    assert_eq!(deadline.num_seconds(), 3600);

    let l = h.engine.take(q.spec(), &worker("w9"), 1).await.unwrap().tasks.remove(0);
    let st = q.status(&l.id).await.unwrap().unwrap();
    assert_eq!((st.state.as_str(), st.attempts, st.retries), ("running", 1, 4));
    assert!(st.taken_until.unwrap() > st.runs[0].started);
    assert_eq!(st.runs[0].run_id, 1);
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.delayed, c.running, c.dead, c.pushed), (1, 1, 1, 0, 3));

    h.engine
        .finish(q.spec(), &[Ack { id: l.id.clone(), token: l.token, resolution: Resolution::Done }])
        .await
        .unwrap();
    let st = q.status(&l.id).await.unwrap().unwrap();
    assert_eq!(st.state, "completed");
    assert!(st.resolved.is_some() && st.runs[0].resolved.is_some() && st.taken_until.is_none());
    assert_eq!(st.runs[0].outcome.as_deref(), Some("done"));
    assert_eq!(q.counts().await.unwrap().done, 1);
    assert!(q.live("a").await.unwrap().is_none());
}

async fn tasks_past_their_deadline_fail(h: &Harness) {
    let q = h.queue(Policy { deadline: Duration::from_millis(200), ..fast() });
    let id = q
        .push("late", &Job { n: 1 }, When::After(Duration::from_millis(400)))
        .await
        .unwrap()
        .task_id()
        .to_owned();
    eventually("the task is resolved", Duration::from_secs(10), || {
        let (e, s, q) = (h.engine.clone(), q.spec().clone(), q.clone());
        async move {
            assert!(e.take(&s, &worker("w"), 1).await.unwrap().tasks.is_empty());
            (q.counts().await.unwrap().dead == 1).then_some(())
        }
    })
    .await;
    let st = q.status(&id).await.unwrap().unwrap();
    assert_eq!((st.state.as_str(), st.reason.as_str(), st.attempts), ("failed", "deadline-exceeded", 0));
}

async fn undecodable_payload_goes_dead_without_stopping_the_worker(h: &Harness) {
    let q = h.queue(fast());
    let item = PushItem { key: "bad".into(), payload: r#"{"n":"not a number"}"#.into(), delay_ms: 0 };
    let bad = h.engine.push(q.spec(), &[item]).await.unwrap().remove(0).task_id().to_owned();
    let (stop, handle) = spawn_worker(&q, "w", 2, |_job: Job| async { Ok(()) });
    q.push("good", &Job { n: 1 }, When::Now).await.unwrap();
    eventually("the good task completes", Duration::from_secs(10), || done_count(&q, 1)).await;
    eventually("the bad one is dead", Duration::from_secs(10), || async {
        (q.counts().await.unwrap().dead == 1).then_some(())
    })
    .await;
    let st = q.status(&bad).await.unwrap().unwrap();
    assert_eq!(st.reason, "permanent");
    assert!(st.last_error.unwrap().contains("undecodable payload"));
    drop(stop);
    handle.await.unwrap();
}

// ---- j. no unbounded growth ----------------------------------------------------------------

async fn finished_and_dead_records_are_trimmed(h: &Harness) {
    let q = h.queue(Policy { keep_finished: 50, keep_dead: 20, max_attempts: 1, ..fast() });
    let mut first_ok = None;
    let mut first_dead = None;
    for round in 0..6u64 {
        for n in 0..50 {
            let id =
                q.push(&format!("vm-{round}-{n}"), &Job { n }, When::Now).await.unwrap().task_id().to_owned();
            first_ok.get_or_insert(id);
        }
        let ids = take_and_resolve(h, &q, 50, |i| {
            if i % 2 == 0 { Resolution::Done } else { Resolution::Fail { error: "x".into() } }
        })
        .await;
        first_dead.get_or_insert(ids[1].clone());
    }
    let c = q.counts().await.unwrap();
    assert_eq!((c.done, c.failed), (150, 150), "counters keep counting");
    assert_eq!(c.dead, 20, "the dead set is capped");
    assert!(q.status(&first_ok.unwrap()).await.unwrap().is_none(), "old finished records are dropped");
    assert!(q.status(&first_dead.unwrap()).await.unwrap().is_none(), "old dead records are dropped");

    let aged = h.queue(Policy { keep_finished_for: Duration::from_millis(300), ..fast() });
    let id = aged.push("old", &Job { n: 1 }, When::Now).await.unwrap().task_id().to_owned();
    let l = h.engine.take(aged.spec(), &worker("w"), 1).await.unwrap().tasks.remove(0);
    h.engine
        .finish(aged.spec(), &[Ack { id: l.id, token: l.token, resolution: Resolution::Done }])
        .await
        .unwrap();
    assert!(aged.status(&id).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Trimming runs with every finish.
    aged.push("new", &Job { n: 2 }, When::Now).await.unwrap();
    let l = h.engine.take(aged.spec(), &worker("w"), 1).await.unwrap().tasks.remove(0);
    h.engine
        .finish(aged.spec(), &[Ack { id: l.id, token: l.token, resolution: Resolution::Done }])
        .await
        .unwrap();
    assert!(aged.status(&id).await.unwrap().is_none(), "records older than keep_finished_for are dropped");
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&super::Harness::memory()).await;
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&super::Harness::redis().await).await;
                }
            )*
        }
    };
}

conformance!(
    keyed_push_dedupes_pending_and_keeps_one_follow_up,
    follow_up_merges_into_a_retrying_task,
    delayed_tasks_wait_for_their_time,
    expired_lease_is_delivered_again_to_any_worker,
    renewed_lease_is_kept,
    handler_stuck_past_its_timeout_gives_the_task_back,
    failing_task_backs_off_then_goes_dead_with_its_last_error,
    permanent_errors_skip_retries_and_retry_after_is_honoured,
    dead_tasks_can_be_listed_retried_and_purged,
    idle_worker_starts_a_newly_pushed_task,
    backlog_of_50000_due_tasks_is_processed,
    graceful_shutdown_finishes_in_flight_and_releases_the_rest,
    counts_and_status_records_follow_each_state,
    tasks_past_their_deadline_fail,
    undecodable_payload_goes_dead_without_stopping_the_worker,
    finished_and_dead_records_are_trimmed,
);
