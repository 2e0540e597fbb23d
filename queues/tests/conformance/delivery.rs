//! Conformance: how tasks travel: keyed pushes and follow-ups, delayed tasks, leases, pickup,
//! backlogs and graceful shutdown.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use gce_backend_queues::engine::{Ack, Resolution};
use gce_backend_queues::testing::eventually;
use gce_backend_queues::{Policy, PushOutcome, When};

use crate::{Harness, Job, LONG, done_count, fast, spawn_worker, worker};

// ---- a. keyed push -------------------------------------------------------------------------

pub(crate) async fn keyed_push_dedupes_pending_and_keeps_one_follow_up(h: &Harness) {
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
    let next = q.status_by_key("vm-1").await.unwrap().expect("the follow-up is pending");
    assert_ne!(next.task_id, lease.id);
    assert_eq!(next.state, "pending");
    let taken = h.engine.take(q.spec(), &worker("w1"), 10).await.unwrap();
    assert_eq!(taken.tasks[0].payload, r#"{"n":3}"#, "the change made during the run survives");
    // Other keys are independent.
    assert!(matches!(q.push("vm-2", &Job { n: 5 }, When::Now).await.unwrap(), PushOutcome::Enqueued(_)));
}

pub(crate) async fn follow_up_merges_into_a_retrying_task(h: &Harness) {
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

pub(crate) async fn again_keeps_the_task_with_fresh_attempts_and_merges_a_follow_up(h: &Harness) {
    let q = h.queue(Policy { max_attempts: 2, deadline: Duration::from_secs(60), ..fast() });
    q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap();
    let pushed = q.counts().await.unwrap().pushed;
    // Fail once (attempt 1 of 2), then look again: attempts start again, the id stays.
    let l = h.engine.take(q.spec(), &worker("w1"), 1).await.unwrap().tasks.remove(0);
    let retry = Resolution::Retry { after: Duration::ZERO, error: "503".into() };
    h.engine.finish(q.spec(), &[Ack { id: l.id.clone(), token: l.token, resolution: retry }]).await.unwrap();
    let l = h.engine.take(q.spec(), &worker("w1"), 1).await.unwrap().tasks.remove(0);
    assert_eq!(l.attempt, 2);
    let again = Resolution::Again { after: Duration::from_millis(300) };
    let n = h.engine.finish(q.spec(), &[Ack { id: l.id.clone(), token: l.token, resolution: again }]).await;
    assert_eq!(n.unwrap(), 0, "not stale");
    let st = q.status(&l.id).await.unwrap().unwrap();
    assert_eq!((st.state.as_str(), st.attempts, st.last_error.as_deref()), ("pending", 0, None));
    let ended = st.runs.last().unwrap().resolved.unwrap();
    assert_eq!(st.run_at.unwrap() - ended, chrono::Duration::milliseconds(300), "due after the delay");
    let outcomes: Vec<_> = st.runs.iter().map(|r| (r.run_id, r.outcome.clone().unwrap())).collect();
    assert_eq!(outcomes, [(1, "retry".to_owned()), (2, "again".to_owned())]);
    let c = q.counts().await.unwrap();
    assert_eq!((c.delayed, c.pushed, c.done), (1, pushed, 1), "the same task, no new one");
    assert!(h.engine.take(q.spec(), &worker("w1"), 1).await.unwrap().tasks.is_empty(), "not due yet");

    // A push while it waits changes nothing; a push during its next run merges into the next
    // look: the newer payload at the earlier time.
    assert!(matches!(
        q.push("vm-1", &Job { n: 2 }, When::Now).await.unwrap(),
        PushOutcome::AlreadyPending(_)
    ));
    tokio::time::sleep(Duration::from_millis(400)).await;
    let l = h.engine.take(q.spec(), &worker("w1"), 1).await.unwrap().tasks.remove(0);
    assert_eq!(l.attempt, 1, "fresh attempts after a look again");
    q.push("vm-1", &Job { n: 3 }, When::Now).await.unwrap();
    let again = Resolution::Again { after: LONG };
    h.engine.finish(q.spec(), &[Ack { id: l.id.clone(), token: l.token, resolution: again }]).await.unwrap();
    let next = h.engine.take(q.spec(), &worker("w1"), 1).await.unwrap().tasks;
    assert_eq!(next.len(), 1, "the follow-up was due now");
    assert_eq!((next[0].id.as_str(), next[0].payload.as_str()), (l.id.as_str(), r#"{"n":3}"#));
    // Two more failures: fresh attempts means the second one is the last (max_attempts 2).
    let retry = Resolution::Retry { after: Duration::ZERO, error: "503".into() };
    let ack = Ack { id: next[0].id.clone(), token: next[0].token.clone(), resolution: retry.clone() };
    h.engine.finish(q.spec(), &[ack]).await.unwrap();
    let l = h.engine.take(q.spec(), &worker("w1"), 1).await.unwrap().tasks.remove(0);
    h.engine.finish(q.spec(), &[Ack { id: l.id.clone(), token: l.token, resolution: retry }]).await.unwrap();
    let st = q.status(&l.id).await.unwrap().unwrap();
    assert_eq!((st.state.as_str(), st.reason.as_str()), ("failed", "retries-exhausted"));
    let ids: Vec<u32> = st.runs.iter().map(|r| r.run_id).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5], "run numbers go on across looks again");
}

/// A hurried push brings forward a task that waits for a later look and a running task's later
/// follow-up (something happened that it should see), but not a retry waiting out its backoff;
/// a plain push changes none of them.
pub(crate) async fn a_hurried_push_brings_a_waiting_task_forward_but_not_a_retry(h: &Harness) {
    let q = h.queue(fast());
    let take = || async { h.engine.take(q.spec(), &worker("w1"), 5).await.unwrap().tasks };
    q.push("vm-1", &Job { n: 1 }, When::After(LONG)).await.unwrap();
    assert!(matches!(
        q.push("vm-1", &Job { n: 2 }, When::Now).await.unwrap(),
        PushOutcome::AlreadyPending(_)
    ));
    assert!(take().await.is_empty(), "a plain push leaves it waiting");
    assert!(matches!(
        q.push("vm-1", &Job { n: 3 }, When::Hurry).await.unwrap(),
        PushOutcome::AlreadyPending(_)
    ));
    let mut got = take().await;
    assert_eq!(got.len(), 1, "due now");
    let l = got.remove(0);
    assert_eq!(l.payload, r#"{"n":1}"#, "the same task");
    // Running: a later follow-up, then hurried.
    assert!(matches!(
        q.push("vm-1", &Job { n: 4 }, When::After(LONG)).await.unwrap(),
        PushOutcome::FollowUp(_)
    ));
    q.push("vm-1", &Job { n: 5 }, When::Hurry).await.unwrap();
    h.engine
        .finish(q.spec(), &[Ack { id: l.id.clone(), token: l.token, resolution: Resolution::Done }])
        .await
        .unwrap();
    let next = take().await;
    assert_eq!(next.len(), 1, "the follow-up was brought forward");
    assert_eq!(next[0].payload, r#"{"n":4}"#);
    // A retry keeps its backoff.
    let retry = Resolution::Retry { after: LONG, error: "503".into() };
    h.engine
        .finish(q.spec(), &[Ack { id: next[0].id.clone(), token: next[0].token.clone(), resolution: retry }])
        .await
        .unwrap();
    q.push("vm-1", &Job { n: 6 }, When::Hurry).await.unwrap();
    assert!(take().await.is_empty(), "a retry's backoff is not cut short");
}

// ---- b. delayed tasks ----------------------------------------------------------------------

pub(crate) async fn delayed_tasks_wait_for_their_time(h: &Harness) {
    let q = h.queue(fast());
    q.push("later", &Job { n: 1 }, When::After(LONG)).await.unwrap();
    q.push("soon", &Job { n: 2 }, When::After(Duration::from_millis(200))).await.unwrap();
    // A time 300 ms from now on the wall clock the Redis server also reads.
    #[allow(clippy::disallowed_methods)]
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
    let at_run = q.status_by_key("at").await.unwrap().unwrap();
    assert!(at_run.runs[0].started >= at - chrono::Duration::milliseconds(5), "not started before its time");
    assert_eq!(q.counts().await.unwrap().delayed, 1, "the 60 s task still waits");
    assert_eq!(q.status_by_key("later").await.unwrap().unwrap().state, "pending");
}

// ---- c. leases -----------------------------------------------------------------------------

pub(crate) async fn expired_lease_is_delivered_again_to_any_worker(h: &Harness) {
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

pub(crate) async fn renewed_lease_is_kept(h: &Harness) {
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

pub(crate) async fn handler_stuck_past_its_timeout_gives_the_task_back(h: &Harness) {
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

// ---- e. pickup -----------------------------------------------------------------------------

pub(crate) async fn idle_worker_starts_a_newly_pushed_task(h: &Harness) {
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

pub(crate) async fn a_delayed_push_that_comes_soonest_wakes_a_waiting_worker(h: &Harness) {
    let q = h.queue(fast());
    q.push("later", &Job { n: 1 }, When::After(Duration::from_secs(600))).await.unwrap();
    let mut waiter = h.engine.waiter(q.spec());
    // Wake-ups of the pushes so far are used up first.
    for _ in 0..3 {
        waiter.wait(Duration::from_millis(20)).await.unwrap();
    }
    let waiting = tokio::spawn(async move { waiter.wait(Duration::from_secs(120)).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "nothing wakes it yet");
    // Due before every other task: a worker waiting for the old soonest time would sleep past it.
    q.push("sooner", &Job { n: 2 }, When::After(Duration::from_secs(300))).await.unwrap();
    eventually("the waiting worker is woken", Duration::from_secs(10), || async {
        waiting.is_finished().then_some(())
    })
    .await;
}

// ---- f. backlogs ---------------------------------------------------------------------------

pub(crate) async fn backlog_of_50000_due_tasks_is_processed(h: &Harness) {
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

pub(crate) async fn graceful_shutdown_finishes_in_flight_and_releases_the_rest(h: &Harness) {
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
