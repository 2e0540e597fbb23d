//! Conformance: a stop that runs out of time. The runs it cuts short are handed back (closed as
//! `handed-back`, their attempt not counted, a push meanwhile merged), the tasks taken but not
//! started are released, nothing is acknowledged as done, and another worker then runs each task
//! once more.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apalis::prelude::*;
use futures::future::BoxFuture;
use gce_backend_queues::backend::stop::{HAND_BACK_LIMIT, HandedBack, Holdings};
use gce_backend_queues::engine::{Ack, Resolution};
use gce_backend_queues::testing::eventually;
use gce_backend_queues::{Policy, PushOutcome, When};
use tokio::sync::watch;

use crate::{Harness, Job, fast, worker};

pub(crate) async fn a_stop_past_its_grace_hands_back_runs_cut_short_and_releases_the_rest(h: &Harness) {
    let q = h.queue(Policy { batch: 10, ..fast() });
    let mut ids = Vec::new();
    for n in 0..10 {
        ids.push(q.push(&format!("vm-{n}"), &Job { n }, When::Now).await.unwrap().task_id().to_owned());
    }
    // Two handlers start and never end; the other eight tasks wait in the worker's buffer.
    let started = Arc::new(Mutex::new(Vec::<u64>::new()));
    let s = started.clone();
    let holdings = Holdings::new();
    let w = WorkerBuilder::new("w")
        .backend(q.backend::<Job>("host-a").held_in(&holdings))
        .concurrency(2)
        .build(move |job: Job| -> BoxFuture<'static, Result<(), BoxDynError>> {
            let s = s.clone();
            Box::pin(async move {
                s.lock().unwrap().push(job.n);
                futures::future::pending::<()>().await;
                Ok(())
            })
        });
    let (stop, mut stopped) = watch::channel(false);
    let signal = async move {
        let _ = stopped.wait_for(|s| *s).await;
        Ok::<(), std::io::Error>(())
    };
    let mut run = tokio::spawn(w.run_until(signal));
    let cut: Vec<u64> = eventually("two runs start", Duration::from_secs(10), || {
        let s = started.clone();
        async move {
            let started = s.lock().unwrap().clone();
            (started.len() == 2).then_some(started)
        }
    })
    .await;
    // A push during a cut run is kept as its follow-up, and merges into the handed-back task.
    let follow_up = q.push(&format!("vm-{}", cut[0]), &Job { n: 100 }, When::Now).await.unwrap();
    assert_eq!(follow_up, PushOutcome::FollowUp(ids[cut[0] as usize].clone()));

    // Told to stop, the worker waits for its two runs, which never end: past a grace it is
    // dropped with them (as the monitor's shutdown_timeout drops it), and what it held is handed
    // back.
    stop.send(true).unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(300), &mut run).await.is_err(), "the runs never end");
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    let handed = holdings.hand_back(HAND_BACK_LIMIT).await;
    assert_eq!(handed, HandedBack { handed_back: 2, released: 8, written: true });
    assert_eq!(started.lock().unwrap().len(), 2, "nothing started after the stop");
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.running, c.done, c.expired, c.dead), (10, 0, 0, 0, 0), "{c:?}");
    for (n, id) in ids.iter().enumerate() {
        let st = q.status(id).await.unwrap().unwrap();
        assert_eq!((st.state.as_str(), st.attempts, st.follow_up), ("pending", 0, false), "{st:?}");
        let outcomes: Vec<_> = st.runs.iter().map(|r| r.outcome.as_deref()).collect();
        match cut.contains(&(n as u64)) {
            true => assert_eq!(outcomes, [Some("handed-back")], "a cut run is kept: {st:?}"),
            false => assert!(outcomes.is_empty(), "a released task has no run: {st:?}"),
        }
    }

    // Another worker takes every task at once (none waits for a lease), each as its first
    // attempt, and the follow-up's payload is the one it runs.
    let taken = h.engine.take(q.spec(), &worker("next"), 20).await.unwrap().tasks;
    assert_eq!(taken.len(), 10);
    assert!(taken.iter().all(|l| l.attempt == 1), "a handed-back run is not counted: {taken:?}");
    let merged = taken.iter().find(|l| l.id == ids[cut[0] as usize]).unwrap();
    assert_eq!(merged.payload, r#"{"n":100}"#);
    let acks: Vec<Ack> = taken
        .iter()
        .map(|l| Ack { id: l.id.clone(), token: l.token.clone(), resolution: Resolution::Done })
        .collect();
    assert_eq!(h.engine.finish(q.spec(), &acks).await.unwrap(), 0);
    assert_eq!(q.counts().await.unwrap().done, 10, "each task done once");
    for n in cut {
        let st = q.status(&ids[n as usize]).await.unwrap().unwrap();
        let runs: Vec<_> =
            st.runs.iter().map(|r| (r.run_id, r.outcome.as_deref(), r.worker_id.as_str())).collect();
        assert_eq!(runs, [(1, Some("handed-back"), "w"), (2, Some("done"), "next")], "{st:?}");
    }
}

/// A worker gone without a stop (its future dropped, as apalis drops one that ended with an
/// error before it restarts it) had its tasks followed by the holdings: the next backend to join
/// them hands those tasks back at once, instead of them waiting out a lease kept renewed.
pub(crate) async fn a_worker_gone_without_a_stop_has_its_tasks_handed_back_when_the_next_joins(h: &Harness) {
    let q = h.queue(Policy { batch: 4, ..fast() });
    let id = q.push("vm-0", &Job { n: 0 }, When::Now).await.unwrap().task_id().to_owned();
    let holdings = Holdings::new();
    let w = WorkerBuilder::new("w")
        .backend(q.backend::<Job>("host-a").held_in(&holdings))
        .concurrency(1)
        .build(|_: Job| -> BoxFuture<'static, Result<(), BoxDynError>> {
            Box::pin(futures::future::pending::<Result<(), BoxDynError>>())
        });
    let run = tokio::spawn(w.run_until(futures::future::pending::<Result<(), std::io::Error>>()));
    eventually("the run starts", Duration::from_secs(10), || async { (holdings.held() == 1).then_some(()) })
        .await;
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert_eq!(q.counts().await.unwrap().running, 1, "still leased to the worker gone");

    // The restarted worker's backend joins: the task comes back with its cut run kept.
    let _next = q.backend::<Job>("host-a").held_in(&holdings);
    let st = eventually("the task is back in the queue", Duration::from_secs(10), || async {
        let st = q.status(&id).await.unwrap().unwrap();
        (st.state == "pending").then_some(st)
    })
    .await;
    let outcomes: Vec<_> = st.runs.iter().map(|r| r.outcome.as_deref()).collect();
    assert_eq!((st.attempts, outcomes), (0, vec![Some("handed-back")]), "{st:?}");
    assert_eq!(holdings.held(), 0, "the backend gone is followed no more");
}
