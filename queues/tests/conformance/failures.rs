//! Conformance: retries and the dead set, status records and deadlines, undecodable payloads,
//! and bounded retention.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use gce_backend_queues::engine::{Ack, PushItem, Resolution};
use gce_backend_queues::testing::eventually;
use gce_backend_queues::{DeadSelection, Policy, When, outcome};

use crate::{Harness, Job, LONG, done_count, fast, spawn_worker, take_and_resolve, worker};

// ---- d. retries and the dead set -----------------------------------------------------------

pub(crate) async fn failing_task_backs_off_then_goes_dead_with_its_last_error(h: &Harness) {
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

pub(crate) async fn permanent_errors_skip_retries_and_retry_after_is_honoured(h: &Harness) {
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

pub(crate) async fn dead_tasks_can_be_listed_retried_and_purged(h: &Harness) {
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

// ---- i. status -----------------------------------------------------------------------------

pub(crate) async fn counts_and_status_records_follow_each_state(h: &Harness) {
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
    assert!(q.status_by_key("a").await.unwrap().is_none());
}

pub(crate) async fn tasks_past_their_deadline_fail(h: &Harness) {
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

pub(crate) async fn undecodable_payload_goes_dead_without_stopping_the_worker(h: &Harness) {
    let q = h.queue(fast());
    let item =
        PushItem { key: "bad".into(), payload: r#"{"n":"not a number"}"#.into(), delay_ms: 0, hurry: false };
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

pub(crate) async fn finished_and_dead_records_are_trimmed(h: &Harness) {
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
