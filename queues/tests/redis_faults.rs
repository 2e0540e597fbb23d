//! Redis-only behaviour: key layout (namespaces, hash tags) and Redis faults (crash with AOF,
//! restart mid-run, dropped connections). Each test starts its own `redis-server`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apalis::prelude::*;
use gce_backend_queues::testing::{RedisServer, eventually, stoppable};
use gce_backend_queues::{Policy, Queue, QueueSpec, RedisEngine, When};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    n: u64,
}

async fn queue(server: &RedisServer, ns: &str, name: &str) -> Queue {
    let engine = RedisEngine::connect(&server.url(), ns).await.unwrap();
    let policy = Policy {
        lease: Duration::from_secs(3),
        backoff_base: Duration::from_millis(20),
        ..Policy::default()
    };
    Queue::new(Arc::new(engine), QueueSpec::new(name, policy).unwrap())
}

async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap()
}

type Seen = Arc<Mutex<HashSet<u64>>>;

async fn record(job: Job, seen: Data<Seen>) -> Result<(), BoxDynError> {
    seen.lock().unwrap().insert(job.n);
    Ok(())
}

/// A worker recording each job it runs; stops when the sender fires or is dropped.
fn recording_worker(q: &Queue, seen: Seen) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let worker = WorkerBuilder::new("recorder")
        .backend(q.backend::<Job>("host"))
        .concurrency(8)
        .data(seen)
        .build(record);
    let (stop, handle) = stoppable(|stop| worker.run_until(stop));
    (
        stop,
        tokio::spawn(async move { handle.await.unwrap().expect("the worker must not end on Redis errors") }),
    )
}

/// Waits until the worker has run `n` distinct jobs.
async fn seen_reaches(seen: &Seen, n: usize, what: &str) {
    eventually(what, Duration::from_secs(60), || async { (seen.lock().unwrap().len() >= n).then_some(()) })
        .await;
}

/// Pushes `n` until Redis acknowledges it, retrying through errors; returns when acknowledged.
async fn push_acknowledged(q: &Queue, n: u64) {
    loop {
        match q.push(&format!("vm-{n}"), &Job { n }, When::Now).await {
            Ok(_) => return,
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_namespaced_per_deployment_and_queue_under_one_hash_tag() {
    let server = RedisServer::start();
    let a = queue(&server, "prod", "create_instance").await;
    let b = queue(&server, "staging", "create_instance").await;
    let c = queue(&server, "prod", "delete_bot").await;
    a.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap();
    a.push("vm-2", &Job { n: 2 }, When::After(Duration::from_secs(60))).await.unwrap();
    b.push("vm-1", &Job { n: 3 }, When::Now).await.unwrap();
    c.push("vm-1", &Job { n: 4 }, When::Now).await.unwrap();

    assert_eq!(a.counts().await.unwrap().pending, 1);
    assert_eq!(b.counts().await.unwrap().pending, 1, "same queue name, other deployment: separate");
    assert_eq!(c.counts().await.unwrap().pending, 1);

    let mut conn = raw(&server).await;
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut conn).await.unwrap();
    assert!(!keys.is_empty());
    let tags: HashSet<&str> = keys
        .iter()
        .map(|k| {
            let end = k.find('}').unwrap_or_else(|| panic!("{k} has no hash tag"));
            assert!(k.starts_with('{'), "{k}: the hash tag must lead the key");
            &k[1..end]
        })
        .collect();
    let expected: HashSet<&str> =
        ["prod:create_instance", "staging:create_instance", "prod:delete_bot"].into();
    assert_eq!(tags, expected, "one hash tag (so one Cluster slot) per deployment and queue");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_pushes_survive_a_redis_crash_with_aof() {
    let mut server = RedisServer::start_with_aof();
    let q = queue(&server, "prod", "jobs").await;
    let jobs: Vec<(String, Job)> = (0..3000).map(|n| (format!("vm-{n}"), Job { n })).collect();
    for chunk in jobs.chunks(500) {
        q.push_many(chunk.iter().map(|(k, j)| (k.clone(), j)), When::Now).await.unwrap();
    }
    server.kill();
    server.restart();
    let q = queue(&server, "prod", "jobs").await;
    let c = q.counts().await.unwrap();
    assert_eq!((c.pending, c.pushed), (3000, 3000), "every acknowledged push is back after the crash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_carry_on_through_a_redis_restart_and_lose_no_acknowledged_push() {
    let mut server = RedisServer::start_with_aof();
    let q = queue(&server, "prod", "jobs").await;
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let (stop, worker) = recording_worker(&q, seen.clone());

    for n in 0..300 {
        push_acknowledged(&q, n).await;
    }
    seen_reaches(&seen, 100, "the first tasks run").await;
    // Crash Redis mid-run; pushes made while it is away retry until it is back.
    server.kill();
    let pusher = {
        let q = q.clone();
        tokio::spawn(async move {
            for n in 300..600 {
                push_acknowledged(&q, n).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart();
    pusher.await.unwrap();

    seen_reaches(&seen, 600, "every acknowledged task runs after the restart").await;
    assert!(!worker.is_finished(), "the worker is still running");
    let c = q.counts().await.unwrap();
    assert_eq!((c.dead, c.failed), (0, 0));
    drop(stop);
    worker.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_carry_on_after_their_connections_are_dropped() {
    let server = RedisServer::start();
    let q = queue(&server, "prod", "jobs").await;
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let (stop, worker) = recording_worker(&q, seen.clone());
    for n in 0..100 {
        push_acknowledged(&q, n).await;
    }
    seen_reaches(&seen, 100, "the first batch runs").await;
    // Drop every client connection (the worker's blocking one included).
    let mut admin = raw(&server).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(killed >= 2, "the worker's connections were dropped ({killed})");
    for n in 100..200 {
        push_acknowledged(&q, n).await;
    }
    seen_reaches(&seen, 200, "the second batch runs on new connections").await;
    assert!(!worker.is_finished());
    drop(stop);
    worker.await.unwrap();
}

#[tokio::test]
async fn the_functions_library_is_loaded_when_redis_lacks_it() {
    let server = RedisServer::start();
    let q = queue(&server, "fns", "jobs").await;
    let mut conn = raw(&server).await;
    let libs = || redis::cmd("FUNCTION").arg("LIST").clone();
    let listed: redis::Value = libs().query_async(&mut conn).await.unwrap();
    assert_eq!(listed, redis::Value::Array(vec![]), "nothing is loaded before the first call");
    q.push("a", &Job { n: 1 }, When::Now).await.unwrap();
    let listed: Vec<redis::Value> = libs().query_async(&mut conn).await.unwrap();
    assert_eq!(listed.len(), 1, "the first call loaded the library");
    // Flushed (as a restart of a Redis that keeps nothing would): the next call loads it again.
    let () = redis::cmd("FUNCTION").arg("FLUSH").query_async(&mut conn).await.unwrap();
    q.push("b", &Job { n: 2 }, When::Now).await.unwrap();
    assert_eq!(q.counts().await.unwrap().pending, 2, "both pushes landed");
    let listed: Vec<redis::Value> = libs().query_async(&mut conn).await.unwrap();
    assert_eq!(listed.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_pushes_made_at_once_travel_together() {
    let server = RedisServer::start();
    let q = queue(&server, "gather", "jobs").await;
    q.push("warm", &Job { n: 0 }, When::Now).await.unwrap();
    let calls = |stats: String| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_fcall:calls="))
            .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
    };
    let mut conn = raw(&server).await;
    let before = calls(redis::cmd("INFO").arg("commandstats").query_async(&mut conn).await.unwrap());
    let pushes = (1..=300).map(|n| {
        let q = q.clone();
        tokio::spawn(async move { q.push(&format!("k{}", n % 200), &Job { n }, When::Now).await.unwrap() })
    });
    let outcomes = futures::future::join_all(pushes).await;
    let after = calls(redis::cmd("INFO").arg("commandstats").query_async(&mut conn).await.unwrap());
    let enqueued = outcomes
        .iter()
        .filter(|o| matches!(o.as_ref().unwrap(), gce_backend_queues::PushOutcome::Enqueued(_)))
        .count();
    assert_eq!(enqueued, 200, "one task per key, whatever the batch");
    assert_eq!(q.counts().await.unwrap().pending, 201);
    assert!(after - before < 300, "300 pushes took {} calls", after - before);
}

/// A task record a newer build's scripts wrote, with fields these scripts do not know (at its top
/// and in a run): taken, run and finished by this build, every one of them is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_record_keeps_the_fields_a_newer_build_wrote() {
    let server = RedisServer::start();
    let q = queue(&server, "prod", "create_instance").await;
    let id = q
        .push("vm-1", &Job { n: 1 }, When::After(Duration::from_millis(300)))
        .await
        .unwrap()
        .task_id()
        .to_owned();
    let mut conn = raw(&server).await;
    let key = "{prod:create_instance}:rec";
    let rec: String = redis::cmd("HGET").arg(key).arg(&id).query_async(&mut conn).await.unwrap();
    let mut rec: serde_json::Value = serde_json::from_str(&rec).unwrap();
    rec["future_field"] = serde_json::json!({"added_by": "a newer build", "nested": {"n": 1}});
    rec["runs"] = serde_json::json!([{"n": 0, "w": "old", "g": "host", "s": 1, "e": 2, "o": "done", "future_field": "x"}]);
    let _: () =
        redis::cmd("HSET").arg(key).arg(&id).arg(rec.to_string()).query_async(&mut conn).await.unwrap();
    let seen: Seen = Arc::default();
    let (stop, worker) = recording_worker(&q, seen.clone());
    seen_reaches(&seen, 1, "the task runs").await;
    let done = eventually("the task is finished", Duration::from_secs(30), || async {
        q.status(&id).await.unwrap().filter(|s| s.state == "completed")
    })
    .await;
    let _ = stop.send(());
    worker.await.unwrap();
    let rec: String = redis::cmd("HGET").arg(key).arg(&id).query_async(&mut conn).await.unwrap();
    let rec: serde_json::Value = serde_json::from_str(&rec).unwrap();
    assert_eq!(rec["future_field"]["nested"]["n"], 1, "kept at its top: {rec}");
    assert_eq!(rec["runs"][0]["future_field"], "x", "kept in the run it wrote: {rec}");
    assert_eq!(done.runs.len(), 2, "the newer build's run and this one's: {done:?}");
}
