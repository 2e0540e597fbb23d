//! Conformance: a task record that cannot be read (not JSON, not an object, lacking fields) goes
//! to the dead set with reason `corrupt` and its raw text, and never costs another task.

use std::time::Duration;

use gce_backend_queues::engine::{Ack, Resolution};
use gce_backend_queues::testing::eventually;
use gce_backend_queues::{DeadSelection, Policy, PushOutcome, Queue, TaskStatus, When};

use crate::{Harness, Job, fast, take_and_resolve, worker};

fn done(l: &gce_backend_queues::engine::Leased) -> Ack {
    Ack { id: l.id.clone(), token: l.token.clone(), resolution: Resolution::Done }
}

/// Checks that task `id` is dead as corrupt under `key`, with `raw` in its error.
async fn assert_buried(q: &Queue, id: &str, key: &str, raw: &str) -> TaskStatus {
    let st = q.status(id).await.unwrap().unwrap_or_else(|| panic!("task {id} has a record"));
    assert_eq!(
        (st.state.as_str(), st.reason.as_str(), st.key.as_str()),
        ("failed", "corrupt", key),
        "{st:?}"
    );
    let error = st.last_error.clone().unwrap_or_default();
    assert!(error.starts_with("corrupt record: ") && error.contains(raw), "{error}");
    assert!(st.resolved.is_some());
    st
}

pub(crate) async fn corrupt_record_in_a_batch_goes_dead_and_the_rest_is_taken(h: &Harness) {
    let q = h.queue(fast());
    let jobs: Vec<(String, Job)> = (0..30).map(|n| (format!("vm-{n}"), Job { n })).collect();
    let ids: Vec<String> = q
        .push_many(jobs.iter().map(|(k, j)| (k.clone(), j)), When::Now)
        .await
        .unwrap()
        .iter()
        .map(|o| o.task_id().to_owned())
        .collect();
    let bad = ids[15].clone();
    h.plant_record(&q, &bad, "{not json").await;

    let taken = h.engine.take(q.spec(), &worker("w"), 32).await.unwrap().tasks;
    assert_eq!(taken.len(), 29, "every other task of the batch is taken");
    assert!(taken.iter().all(|l| l.id != bad));
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.running, c.dead, c.failed), (0, 29, 1, 1));
    let dead = q.dead(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].task_id, bad);
    let st = assert_buried(&q, &bad, "", "{not json").await;
    assert_eq!(dead[0], st, "dead() and status() agree");

    // The corrupt task's key takes a new task at once.
    let again = q.push("vm-15", &Job { n: 15 }, When::Now).await.unwrap();
    assert!(matches!(&again, PushOutcome::Enqueued(id) if *id != bad), "{again:?}");
    // Once the others are done, every key takes a new task: none is stuck as already pending.
    let acks: Vec<Ack> = taken.iter().map(done).collect();
    assert_eq!(h.engine.finish(q.spec(), &acks).await.unwrap(), 0);
    for (key, job) in jobs.iter().filter(|(k, _)| k != "vm-15") {
        let out = q.push(key, job, When::Now).await.unwrap();
        assert!(matches!(out, PushOutcome::Enqueued(_)), "{key}: {out:?}");
    }
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.running, c.done, c.dead), (30, 0, 29, 1));

    // A corrupt record at the head does not use up a place in the batch.
    let head = q.pending(1, 0).await.unwrap().remove(0);
    h.plant_record(&q, &head.task_id, "not json either").await;
    let taken = h.engine.take(q.spec(), &worker("w"), 2).await.unwrap().tasks;
    assert_eq!(taken.len(), 2);
    assert!(taken.iter().all(|l| l.id != head.task_id));
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.running, c.dead), (27, 2, 2));
}

pub(crate) async fn push_replaces_a_live_task_whose_record_is_corrupt_or_missing(h: &Harness) {
    let q = h.queue(fast());
    q.push("vm-b", &Job { n: 0 }, When::Now).await.unwrap();
    // A record lacking fields, that still names its key.
    let old = q.push("vm-a", &Job { n: 1 }, When::Now).await.unwrap().task_id().to_owned();
    let lacking = r#"{"k":"vm-a","s":"pending"}"#;
    h.plant_record(&q, &old, lacking).await;
    let out = q.push("vm-a", &Job { n: 2 }, When::Now).await.unwrap();
    assert!(matches!(&out, PushOutcome::Enqueued(id) if *id != old), "{out:?}");
    assert_buried(&q, &old, "vm-a", lacking).await;
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.dead), (2, 1), "the buried task left the ready list");

    // A decoded value that is not a record at all: the push's key is kept on the dead record.
    let other = q.push("vm-c", &Job { n: 3 }, When::After(crate::LONG)).await.unwrap().task_id().to_owned();
    h.plant_record(&q, &other, "[1,2,3]").await;
    let out = q.push("vm-c", &Job { n: 4 }, When::Now).await.unwrap();
    assert!(matches!(&out, PushOutcome::Enqueued(id) if *id != other), "{out:?}");
    assert_buried(&q, &other, "vm-c", "[1,2,3]").await;
    assert_eq!(q.counts().await.unwrap().delayed, 0, "the buried task left the delayed set");

    // A key entry naming a task that has no record counts as absent.
    h.plant_key(&q, "ghost", "999999").await;
    let out = q.push("ghost", &Job { n: 5 }, When::Now).await.unwrap();
    assert!(matches!(&out, PushOutcome::Enqueued(id) if id != "999999"), "{out:?}");

    let taken = h.engine.take(q.spec(), &worker("w"), 10).await.unwrap().tasks;
    let got: Vec<(&str, &str)> = taken.iter().map(|l| (l.key.as_str(), l.payload.as_str())).collect();
    assert_eq!(
        got,
        [("vm-b", r#"{"n":0}"#), ("vm-a", r#"{"n":2}"#), ("vm-c", r#"{"n":4}"#), ("ghost", r#"{"n":5}"#)]
    );
    assert_eq!(q.counts().await.unwrap().dead, 2);
}

pub(crate) async fn finish_renew_and_expired_leases_survive_corrupt_records(h: &Harness) {
    let q = h.queue(Policy { lease: Duration::from_millis(500), ..fast() });
    for key in ["a", "b", "c", "d"] {
        q.push(key, &Job { n: 0 }, When::Now).await.unwrap();
    }
    let l = h.engine.take(q.spec(), &worker("w"), 4).await.unwrap().tasks;
    assert_eq!(l.len(), 4);

    // finish: the corrupt record's ack counts as stale; the other ack of the call is taken.
    h.plant_record(&q, &l[0].id, "{not json").await;
    assert_eq!(h.engine.finish(q.spec(), &[done(&l[0]), done(&l[1])]).await.unwrap(), 1);
    assert_eq!(q.status(&l[1].id).await.unwrap().unwrap().state, "completed");
    assert_buried(&q, &l[0].id, "", "{not json").await;

    // renew: the corrupt record's lease counts as lost; the other one is renewed.
    h.plant_record(&q, &l[2].id, r#""just a string""#).await;
    let leases = [(l[2].id.clone(), l[2].token.clone()), (l[3].id.clone(), l[3].token.clone())];
    assert_eq!(h.engine.renew(q.spec(), &leases).await.unwrap(), [l[2].id.clone()]);
    assert_buried(&q, &l[2].id, "", "just a string").await;

    // The expired-lease pass of a take buries a corrupt record it meets.
    h.plant_record(&q, &l[3].id, "{}").await;
    eventually("the expired lease is met", Duration::from_secs(10), || {
        let (e, s, q) = (h.engine.clone(), q.spec().clone(), q.clone());
        async move {
            assert!(e.take(&s, &worker("w"), 1).await.unwrap().tasks.is_empty());
            (q.counts().await.unwrap().dead == 3).then_some(())
        }
    })
    .await;
    assert_buried(&q, &l[3].id, "", "{}").await;
    let c = q.counts().await.unwrap();
    assert_eq!((c.running, c.pending, c.dead, c.failed, c.done), (0, 0, 3, 3, 1));
    for key in ["a", "c", "d"] {
        let out = q.push(key, &Job { n: 1 }, When::Now).await.unwrap();
        assert!(matches!(out, PushOutcome::Enqueued(_)), "{key}: {out:?}");
    }
}

pub(crate) async fn follow_up_of_a_corrupt_running_record_becomes_a_task(h: &Harness) {
    let q = h.queue(fast());
    q.push("vm-f", &Job { n: 1 }, When::Now).await.unwrap();
    let l = h.engine.take(q.spec(), &worker("w"), 1).await.unwrap().tasks.remove(0);
    assert_eq!(q.push("vm-f", &Job { n: 2 }, When::Now).await.unwrap(), PushOutcome::FollowUp(l.id.clone()));
    let lacking = r#"{"k":"vm-f","s":"running"}"#;
    h.plant_record(&q, &l.id, lacking).await;
    assert_eq!(h.engine.finish(q.spec(), &[done(&l)]).await.unwrap(), 1, "the ack is stale");
    assert_buried(&q, &l.id, "vm-f", lacking).await;
    // The push made during the run is not lost.
    let next = q.status_by_key("vm-f").await.unwrap().expect("the follow-up is pending");
    assert_ne!(next.task_id, l.id);
    let again = h.engine.take(q.spec(), &worker("w"), 1).await.unwrap().tasks;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].payload, r#"{"n":2}"#);
}

pub(crate) async fn dead_retry_leaves_corrupt_records_dead_and_purge_drops_them(h: &Harness) {
    let q = h.queue(Policy { max_attempts: 1, ..fast() });
    // 600 tasks die first (they will be corrupt), 5 die later: a retry of every dead task must get
    // past more than a chunk (500) of corrupt records to reach them.
    let jobs: Vec<(String, Job)> = (0..605).map(|n| (format!("vm-{n}"), Job { n })).collect();
    q.push_many(jobs.iter().map(|(k, j)| (k.clone(), j)), When::Now).await.unwrap();
    let fail = |_| Resolution::Fail { error: "x".into() };
    let corrupt = take_and_resolve(h, &q, 600, fail).await;
    // Setup only: the later deaths must get a later time than the first 600 (millisecond clock).
    tokio::time::sleep(Duration::from_millis(10)).await;
    let good = take_and_resolve(h, &q, 5, fail).await;
    assert_eq!((corrupt.len(), good.len(), q.counts().await.unwrap().dead), (600, 5, 605));
    for id in &corrupt {
        h.plant_record(&q, id, "{not json").await;
    }

    // Listed before any call met it, a corrupt dead record shows as such.
    let listed = q.dead(1000).await.unwrap();
    let first = listed.iter().find(|st| st.task_id == corrupt[0]).expect("listed");
    assert_eq!((first.state.as_str(), first.reason.as_str()), ("failed", "corrupt"));

    assert_eq!(q.retry_dead(DeadSelection::One(corrupt[0].clone())).await.unwrap(), 0);
    assert_buried(&q, &corrupt[0], "", "{not json").await;
    assert_eq!(q.retry_dead(DeadSelection::All).await.unwrap(), 5, "only the readable ones");
    let c = q.counts().await.unwrap();
    assert_eq!((c.dead, c.pending, c.failed), (600, 5, 605), "burying a dead task does not count it twice");
    for id in &good {
        assert_eq!(q.status(id).await.unwrap().unwrap().state, "pending");
    }
    assert_buried(&q, &corrupt[599], "", "{not json").await;

    assert_eq!(q.purge_dead().await.unwrap(), 600);
    assert_eq!(q.counts().await.unwrap().dead, 0);
    assert!(q.status(&corrupt[0]).await.unwrap().is_none(), "purged records are gone");
}

pub(crate) async fn a_running_record_without_runs_is_finished_and_redelivered(h: &Harness) {
    // `runs` is optional on the wire: a record without it must not break the scripts that close
    // a run (Redis does not roll back a script that fails half way).
    let q = h.queue(Policy { lease: Duration::from_millis(500), ..fast() });
    for key in ["a", "b"] {
        q.push(key, &Job { n: 0 }, When::Now).await.unwrap();
    }
    let l = h.engine.take(q.spec(), &worker("w"), 2).await.unwrap().tasks;
    for t in &l {
        let raw = format!(
            r#"{{"k":"{}","s":"running","a":1,"m":5,"c":1,"d":0,"due":1,"tok":"{}"}}"#,
            t.key, t.token
        );
        h.plant_record(&q, &t.id, &raw).await;
    }
    assert_eq!(h.engine.finish(q.spec(), &[done(&l[0])]).await.unwrap(), 0, "not stale");
    assert_eq!(q.status(&l[0].id).await.unwrap().unwrap().state, "completed");
    let again = eventually("b's lease runs out and it is delivered again", Duration::from_secs(10), || {
        let (e, s) = (h.engine.clone(), q.spec().clone());
        async move { e.take(&s, &worker("w2"), 1).await.unwrap().tasks.into_iter().next() }
    })
    .await;
    assert_eq!((again.key.as_str(), again.attempt), ("b", 2));
    assert_eq!(q.counts().await.unwrap().dead, 0);
}
