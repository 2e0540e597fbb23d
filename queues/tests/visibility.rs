//! The dead hook: what the backend tells an application about each task that goes dead (memory
//! engine, real apalis workers). The `task` span and the `task dead` line: `task_span.rs`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apalis::prelude::*;
use gce_backend_queues::engine::PushItem;
use gce_backend_queues::testing::{eventually, stoppable};
use gce_backend_queues::{
    DeadHook, DeadTask, MemoryEngine, Policy, Queue, QueueMetrics, QueueSpec, When, outcome,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    n: u64,
}

fn policy(max_attempts: u32) -> Policy {
    Policy {
        max_attempts,
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(50),
        lease: Duration::from_secs(2),
        ..Policy::default()
    }
}

type Calls = Arc<Mutex<Vec<DeadTask>>>;

fn recording_hook(calls: Calls) -> DeadHook {
    Arc::new(move |dead| {
        let calls = calls.clone();
        Box::pin(async move { calls.lock().unwrap().push(dead) })
    })
}

/// Runs `handler` on a worker over `q` until the sender fires; the handle ends when it stopped.
fn run<F, Fut>(q: &Queue, handler: F) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>)
where
    F: Fn(Job) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), BoxDynError>> + Send + 'static,
{
    let worker = WorkerBuilder::new(q.spec().name.as_str())
        .backend(q.backend::<Job>("host"))
        .concurrency(4)
        .build(handler);
    let (stop, handle) = stoppable(|stop| worker.run_until(stop));
    (stop, tokio::spawn(async move { handle.await.unwrap().expect("the worker ends cleanly") }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_hook_is_called_once_for_each_task_that_goes_dead() {
    let engine = Arc::new(MemoryEngine::new());
    let calls: Calls = Arc::default();
    let metrics = QueueMetrics::default();
    let perm = Queue::new(engine.clone(), QueueSpec::new("perm", policy(5)).unwrap())
        .with_dead_hook(recording_hook(calls.clone()))
        .with_metrics(metrics.clone());
    let flaky = Queue::new(engine.clone(), QueueSpec::new("flaky", policy(2)).unwrap())
        .with_dead_hook(recording_hook(calls.clone()))
        .with_metrics(metrics.clone());

    let (stop_perm, perm_worker) =
        run(&perm, |job: Job| async move { Err(outcome::permanent(format!("bad request {}", job.n))) });
    // Job 99 fails once, then succeeds: it never goes dead.
    let runs = Arc::new(Mutex::new(HashMap::<u64, u32>::new()));
    let r = runs.clone();
    let (stop_flaky, flaky_worker) = run(&flaky, move |job: Job| {
        let r = r.clone();
        async move {
            let n = {
                let mut runs = r.lock().unwrap();
                let n = runs.entry(job.n).or_default();
                *n += 1;
                *n
            };
            if job.n == 99 && n == 2 { Ok(()) } else { Err(format!("503 for {} (run {n})", job.n).into()) }
        }
    });

    let mut ids = HashMap::new();
    for n in 0..3 {
        ids.insert(format!("p-{n}"), perm.push(&format!("p-{n}"), &Job { n }, When::Now).await.unwrap());
    }
    for n in [0, 1, 99] {
        ids.insert(format!("f-{n}"), flaky.push(&format!("f-{n}"), &Job { n }, When::Now).await.unwrap());
    }
    // A payload this build cannot decode goes dead without a run of the handler: reported too.
    let bad = PushItem { key: "p-bad".into(), payload: r#"{"n":"x"}"#.into(), delay_ms: 0, hurry: false };
    let bad = perm.engine().push(perm.spec(), &[bad]).await.unwrap().remove(0);
    ids.insert("p-bad".into(), bad);

    eventually("six tasks go dead and one completes", Duration::from_secs(20), || async {
        let (p, f) = (perm.counts().await.unwrap(), flaky.counts().await.unwrap());
        (calls.lock().unwrap().len() >= 6 && p.dead == 4 && f.dead == 2 && f.done == 1).then_some(())
    })
    .await;
    // Graceful stops: every run has been acked and reported once they return.
    stop_perm.send(()).unwrap();
    stop_flaky.send(()).unwrap();
    perm_worker.await.unwrap();
    flaky_worker.await.unwrap();

    let calls = calls.lock().unwrap().clone();
    let by_key: BTreeMap<&str, &DeadTask> = calls.iter().map(|d| (d.key.as_str(), d)).collect();
    assert_eq!(calls.len(), 6, "once per dead task: {calls:#?}");
    assert_eq!(by_key.keys().copied().collect::<Vec<_>>(), ["f-0", "f-1", "p-0", "p-1", "p-2", "p-bad"]);
    for (key, dead) in &by_key {
        assert_eq!(dead.id, ids[*key].task_id(), "{key}");
        let (queue, attempts, reason) = if key.starts_with('p') {
            ("perm", 1, outcome::PERMANENT)
        } else {
            ("flaky", 2, outcome::RETRIES_EXHAUSTED)
        };
        assert_eq!(
            (dead.queue.as_str(), dead.attempts, dead.reason.as_str()),
            (queue, attempts, reason),
            "{key}"
        );
        let status = if key.starts_with('p') { perm.status(&dead.id) } else { flaky.status(&dead.id) };
        let st = status.await.unwrap().unwrap();
        assert_eq!(
            (st.state.as_str(), st.reason.as_str(), st.attempts),
            ("failed", reason, attempts),
            "{key}"
        );
        assert_eq!(st.last_error.as_deref(), Some(dead.error.as_str()), "{key}");
    }
    assert!(by_key["p-1"].error.contains("bad request 1"));
    assert!(by_key["f-0"].error.contains("503 for 0 (run 2)"));
    assert!(by_key["p-bad"].error.starts_with("undecodable payload"));
    let dead_counts = (perm.counts().await.unwrap().dead, flaky.counts().await.unwrap().dead);
    assert_eq!(dead_counts, (4, 2), "the hook's count matches the dead sets");
    // The workers' runs, by how they ended: f-0 and f-1 retried once then died, 99 retried once.
    let runs = |q, r| metrics.runs(q, r);
    assert_eq!((runs("perm", "dead"), runs("perm", "retry"), runs("perm", "done")), (4, 0, 0));
    assert_eq!((runs("flaky", "dead"), runs("flaky", "retry"), runs("flaky", "done")), (2, 3, 1));
}

/// Acks race lease renewals all the time (short leases, quick tasks, on Redis): a task acked
/// between a renewal's snapshot and its answer is done, not lost, and is never reported so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_racing_a_renewal_is_not_reported_as_a_lost_lease() {
    let server = gce_backend_queues::testing::RedisServer::start();
    let engine = Arc::new(gce_backend_queues::RedisEngine::connect(&server.url(), "race").await.unwrap());
    let metrics = QueueMetrics::default();
    let policy = Policy { lease: Duration::from_millis(300), ..policy(3) };
    let q = Queue::new(engine, QueueSpec::new("quick", policy).unwrap()).with_metrics(metrics.clone());
    let (stop, worker) = run(&q, |_job: Job| async move {
        tokio::time::sleep(Duration::from_millis(3)).await;
        Ok(())
    });
    let n = 3000;
    let items: Vec<PushItem> = (0..n)
        .map(|i| PushItem {
            key: format!("k-{i}"),
            payload: format!(r#"{{"n":{i}}}"#),
            delay_ms: 0,
            hurry: false,
        })
        .collect();
    q.engine().push(q.spec(), &items).await.unwrap();
    eventually("every task done", Duration::from_secs(60), || async {
        (q.counts().await.unwrap().done == n).then_some(())
    })
    .await;
    stop.send(()).unwrap();
    worker.await.unwrap();
    assert_eq!(q.counts().await.unwrap().expired, 0, "no lease really ran out");
    assert_eq!(metrics.leases_lost("quick"), 0, "no false alarm");
}
