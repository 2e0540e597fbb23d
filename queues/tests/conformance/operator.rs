//! Conformance: operator operations on pending work: listing due and delayed tasks, the live task
//! of a key, and purging every pending task.

use std::time::Duration;

use chrono::Utc;
use gce_backend_queues::engine::{Ack, Resolution};
use gce_backend_queues::{PushOutcome, When};

use crate::{Harness, Job, LONG, fast, worker};

fn keys(list: &[gce_backend_queues::TaskStatus]) -> Vec<&str> {
    list.iter().map(|st| st.key.as_str()).collect()
}

pub(crate) async fn pending_and_delayed_list_tasks_in_the_order_they_will_run(h: &Harness) {
    let q = h.queue(fast());
    for n in 0..5 {
        q.push(&format!("due-{n}"), &Job { n }, When::Now).await.unwrap();
    }
    for secs in [60, 30, 45] {
        q.push(&format!("later-{secs}"), &Job { n: secs }, When::After(Duration::from_secs(secs)))
            .await
            .unwrap();
    }
    assert_eq!(keys(&q.pending(2, 0).await.unwrap()), ["due-0", "due-1"]);
    let rest = q.pending(10, 2).await.unwrap();
    assert_eq!(keys(&rest), ["due-2", "due-3", "due-4"]);
    assert!(rest.iter().all(|st| st.state == "pending" && st.run_at.is_some()));
    assert!(q.pending(10, 5).await.unwrap().is_empty());
    assert!(q.pending(0, 0).await.unwrap().is_empty());

    let delayed = q.delayed(10, 0).await.unwrap();
    assert_eq!(keys(&delayed), ["later-30", "later-45", "later-60"], "soonest first");
    // The Redis engine stamps run_at from the server's clock: compare with the real wall time.
    #[allow(clippy::disallowed_methods)]
    let now = Utc::now();
    assert!(delayed.iter().all(|st| st.state == "pending" && st.run_at.is_some_and(|t| t > now)));
    assert!(delayed.windows(2).all(|w| w[0].run_at < w[1].run_at));
    assert_eq!(keys(&q.delayed(1, 1).await.unwrap()), ["later-45"]);
    assert!(q.delayed(10, 3).await.unwrap().is_empty());

    // A task given back (never started) goes to the head: listed, and taken, first.
    let l = h.engine.take(q.spec(), &worker("w"), 1).await.unwrap().tasks.remove(0);
    assert_eq!(keys(&q.pending(10, 0).await.unwrap()), ["due-1", "due-2", "due-3", "due-4"]);
    let release = Ack { id: l.id.clone(), token: l.token.clone(), resolution: Resolution::Release };
    h.engine.finish(q.spec(), &[release]).await.unwrap();
    assert_eq!(keys(&q.pending(1, 0).await.unwrap()), ["due-0"]);

    // A failed run waiting for its retry is delayed, listed by when it runs again.
    let l = h.engine.take(q.spec(), &worker("w"), 1).await.unwrap().tasks.remove(0);
    assert_eq!(l.key, "due-0");
    let retry = Resolution::Retry { after: Duration::from_secs(10), error: "503".into() };
    h.engine.finish(q.spec(), &[Ack { id: l.id.clone(), token: l.token, resolution: retry }]).await.unwrap();
    let delayed = q.delayed(10, 0).await.unwrap();
    assert_eq!(keys(&delayed), ["due-0", "later-30", "later-45", "later-60"]);
    assert_eq!((delayed[0].attempts, delayed[0].last_error.as_deref()), (1, Some("503")));
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.delayed), (4, 4));
}

pub(crate) async fn status_by_key_follows_the_live_task(h: &Harness) {
    let q = h.queue(fast());
    assert!(q.status_by_key("vm-1").await.unwrap().is_none());
    let id = q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap().task_id().to_owned();
    let st = q.status_by_key("vm-1").await.unwrap().unwrap();
    assert_eq!((st.task_id.as_str(), st.state.as_str()), (id.as_str(), "pending"));
    let l = h.engine.take(q.spec(), &worker("w"), 1).await.unwrap().tasks.remove(0);
    assert_eq!(q.status_by_key("vm-1").await.unwrap().unwrap().state, "running");
    assert_eq!(
        q.status_by_key("vm-1").await.unwrap(),
        q.status_by_key("vm-1").await.unwrap(),
        "live is an alias"
    );
    let ack = Ack { id: l.id, token: l.token, resolution: Resolution::Done };
    h.engine.finish(q.spec(), &[ack]).await.unwrap();
    assert!(q.status_by_key("vm-1").await.unwrap().is_none(), "a finished task is not live");
    assert_eq!(q.status(&id).await.unwrap().unwrap().state, "completed");
}

pub(crate) async fn purge_pending_drops_a_large_backlog_but_not_running_tasks(h: &Harness) {
    let q = h.queue(fast());
    q.push("busy", &Job { n: 0 }, When::Now).await.unwrap();
    let busy = h.engine.take(q.spec(), &worker("w"), 1).await.unwrap().tasks.remove(0);
    assert!(matches!(q.push("busy", &Job { n: 1 }, When::Now).await.unwrap(), PushOutcome::FollowUp(_)));
    let due: Vec<(String, Job)> = (0..1500).map(|n| (format!("due-{n}"), Job { n })).collect();
    let later: Vec<(String, Job)> = (0..1500).map(|n| (format!("later-{n}"), Job { n })).collect();
    let first_due = q.push_many(due.iter().map(|(k, j)| (k.clone(), j)), When::Now).await.unwrap()[0].clone();
    q.push_many(later.iter().map(|(k, j)| (k.clone(), j)), When::After(LONG)).await.unwrap();
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.delayed, c.running), (1500, 1500, 1));

    assert_eq!(q.purge_pending().await.unwrap(), 3000);
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.delayed, c.running, c.dead, c.pushed), (0, 0, 1, 0, 3001));
    assert!(q.pending(10, 0).await.unwrap().is_empty() && q.delayed(10, 0).await.unwrap().is_empty());
    assert!(q.status(first_due.task_id()).await.unwrap().is_none(), "purged records are gone");
    assert!(q.status_by_key("later-7").await.unwrap().is_none());
    assert_eq!(q.purge_pending().await.unwrap(), 0, "nothing left to purge");

    // The running task is untouched: it completes, and the push made during its run (kept, as
    // documented) becomes pending.
    assert_eq!(q.status(&busy.id).await.unwrap().unwrap().state, "running");
    let ack = Ack { id: busy.id.clone(), token: busy.token, resolution: Resolution::Done };
    assert_eq!(h.engine.finish(q.spec(), &[ack]).await.unwrap(), 0);
    assert_eq!(q.status(&busy.id).await.unwrap().unwrap().state, "completed");
    assert_eq!(keys(&q.pending(10, 0).await.unwrap()), ["busy"]);

    // Purged keys take fresh tasks.
    for key in ["due-0", "due-1499", "later-0"] {
        let out = q.push(key, &Job { n: 9 }, When::Now).await.unwrap();
        assert!(matches!(&out, PushOutcome::Enqueued(id) if id != first_due.task_id()), "{key}: {out:?}");
    }
    assert_eq!(q.counts().await.unwrap().pending, 4);
}
