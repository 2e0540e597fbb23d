//! Conformance: task ids are random 22-character slugs made by the queue, kept by deduplicated
//! pushes, fresh for every follow-up, and found by `status`; older decimal ids stay valid.

use std::collections::HashSet;
use std::time::Duration;

use gce_backend_queues::engine::{Ack, Resolution};
use gce_backend_queues::testing::eventually;
use gce_backend_queues::{Policy, PushOutcome, When};

use crate::{Harness, Job, fast, worker};

/// Checks that `id` matches `^[A-Za-z0-9_-]{22}$`.
fn assert_slug(id: &str) {
    assert!(
        id.len() == 22 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{id:?} is not a 22-character slug"
    );
}

pub(crate) async fn pushed_tasks_get_distinct_random_ids_kept_by_dedupe(h: &Harness) {
    let q = h.queue(fast());
    let jobs: Vec<(String, Job)> = (0..1000).map(|n| (format!("vm-{n}"), Job { n })).collect();
    let first = q.push_many(jobs.iter().map(|(k, j)| (k.clone(), j)), When::Now).await.unwrap();
    assert!(first.iter().all(|o| matches!(o, PushOutcome::Enqueued(_))));
    let ids: Vec<String> = first.iter().map(|o| o.task_id().to_owned()).collect();
    ids.iter().for_each(|id| assert_slug(id));
    let mut seen: HashSet<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(seen.len(), 1000, "every id is distinct");
    for (id, (key, _)) in ids.iter().zip(&jobs) {
        let st = q.status(id).await.unwrap().unwrap_or_else(|| panic!("{id} has a status"));
        assert_eq!(
            (st.task_id.as_str(), st.key.as_str(), st.state.as_str()),
            (id.as_str(), key.as_str(), "pending")
        );
    }

    // A deduplicated push lands on the original task and returns its id.
    let again = q.push_many(jobs.iter().map(|(k, j)| (k.clone(), j)), When::Now).await.unwrap();
    let expected: Vec<PushOutcome> = ids.iter().cloned().map(PushOutcome::AlreadyPending).collect();
    assert_eq!(again, expected);
    // So does a second push of a key within one call.
    let job = Job { n: 0 };
    let twice = q.push_many([("dup".to_owned(), &job), ("dup".to_owned(), &job)], When::Now).await.unwrap();
    assert!(matches!(&twice[0], PushOutcome::Enqueued(_)), "{twice:?}");
    assert_eq!(twice[1], PushOutcome::AlreadyPending(twice[0].task_id().to_owned()));
    assert_slug(twice[0].task_id());
    assert!(seen.insert(twice[0].task_id()));

    // Single pushes too.
    let mut singles = Vec::new();
    for n in 0..20 {
        singles
            .push(q.push(&format!("single-{n}"), &Job { n }, When::Now).await.unwrap().task_id().to_owned());
    }
    for id in &singles {
        assert_slug(id);
        assert!(seen.insert(id), "{id} is new");
        assert!(q.status(id).await.unwrap().is_some());
    }
    assert_eq!(q.counts().await.unwrap().pushed, 1021);
}

pub(crate) async fn follow_ups_become_tasks_with_new_random_ids(h: &Harness) {
    // A follow-up turned into a task by an ack.
    let q = h.queue(Policy { max_attempts: 1, lease: Duration::from_millis(300), ..fast() });
    let first = q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap().task_id().to_owned();
    let l = h.engine.take(q.spec(), &worker("w"), 1).await.unwrap().tasks.remove(0);
    assert_eq!(l.id, first);
    assert_eq!(q.push("vm-1", &Job { n: 2 }, When::Now).await.unwrap(), PushOutcome::FollowUp(first.clone()));
    let ack = Ack { id: l.id.clone(), token: l.token, resolution: Resolution::Done };
    assert_eq!(h.engine.finish(q.spec(), &[ack]).await.unwrap(), 0);
    let next = q.status_by_key("vm-1").await.unwrap().expect("the follow-up is pending");
    assert_slug(&next.task_id);
    assert_ne!(next.task_id, first);
    let st = q.status(&next.task_id).await.unwrap().expect("status finds the follow-up");
    assert_eq!((st.key.as_str(), st.state.as_str()), ("vm-1", "pending"));
    assert_eq!(q.status(&first).await.unwrap().unwrap().state, "completed");

    // Follow-ups turned into tasks by a take, when two expired leases fail in the same call.
    let mut old = Vec::new();
    for key in ["a", "b"] {
        q.push(key, &Job { n: 3 }, When::Now).await.unwrap();
    }
    let leased = h.engine.take(q.spec(), &worker("w"), 3).await.unwrap().tasks;
    assert_eq!(leased.len(), 3, "vm-1's follow-up, a and b");
    for l in leased.iter().filter(|l| l.key != "vm-1") {
        assert!(matches!(q.push(&l.key, &Job { n: 4 }, When::Now).await.unwrap(), PushOutcome::FollowUp(_)));
        old.push(l.id.clone());
    }
    eventually("the leases run out and the tasks fail", Duration::from_secs(10), || {
        let (e, s, q) = (h.engine.clone(), q.spec().clone(), q.clone());
        async move {
            e.take(&s, &worker("w2"), 10).await.unwrap();
            (q.counts().await.unwrap().dead == 3).then_some(())
        }
    })
    .await;
    let mut fresh = HashSet::new();
    for (key, old) in ["a", "b"].iter().zip(&old) {
        let st = q.status_by_key(key).await.unwrap().expect("the follow-up is live");
        assert_slug(&st.task_id);
        assert_ne!(&st.task_id, old);
        assert!(q.status(&st.task_id).await.unwrap().is_some());
        assert_eq!(q.status(old).await.unwrap().unwrap().reason, "lease-expired");
        fresh.insert(st.task_id);
    }
    assert_eq!(fresh.len(), 2, "each follow-up has its own id");
    assert!(!fresh.contains(&next.task_id) && !fresh.contains(&first));
}

pub(crate) async fn decimal_ids_of_older_records_stay_valid(h: &Harness) {
    let q = h.queue(fast());
    // A running task as a queue from before random ids holds it.
    let raw = r#"{"k":"old","s":"running","a":1,"m":5,"c":1,"d":0,"due":1,"tok":"w:17:1",
        "runs":[{"n":1,"w":"w","g":"host-a","s":1}]}"#;
    h.plant_record(&q, "17", raw).await;
    h.plant_key(&q, "old", "17").await;
    let st = q.status("17").await.unwrap().expect("an old record is found");
    assert_eq!((st.key.as_str(), st.state.as_str(), st.runs[0].run_id), ("old", "running", 1));
    assert_eq!(q.status_by_key("old").await.unwrap().unwrap().task_id, "17");
    assert_eq!(q.push("old", &Job { n: 1 }, When::Now).await.unwrap(), PushOutcome::FollowUp("17".into()));

    let ack = Ack { id: "17".into(), token: "w:17:1".into(), resolution: Resolution::Done };
    assert_eq!(h.engine.finish(q.spec(), &[ack]).await.unwrap(), 0);
    assert_eq!(q.status("17").await.unwrap().unwrap().state, "completed");
    let next = q.status_by_key("old").await.unwrap().expect("the follow-up is pending");
    assert_slug(&next.task_id);
    let l = h.engine.take(q.spec(), &worker("w"), 1).await.unwrap().tasks.remove(0);
    assert_eq!((l.id.as_str(), l.payload.as_str()), (next.task_id.as_str(), r#"{"n":1}"#));
}
