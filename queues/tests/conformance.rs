//! Conformance suite: the same queue semantics checked against the in-memory engine and the Redis
//! engine, on one server and on a three-primary cluster (each Redis test starts its own
//! `redis-server` processes on free loopback ports).
//!
//! This file holds the harness and the list; the tests live in `conformance/`, one file per
//! topic.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::*;
use gce_backend_queues::engine::{Ack, Resolution};
use gce_backend_queues::link::Link;
use gce_backend_queues::testing::{Cluster, RedisServer, stoppable};
use gce_backend_queues::{Engine, MemoryEngine, Policy, Queue, QueueSpec, RedisEngine, WorkerId};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

#[path = "conformance/corrupt.rs"]
mod corrupt;
#[path = "conformance/delivery.rs"]
mod delivery;
#[path = "conformance/failures.rs"]
mod failures;
#[path = "conformance/ids.rs"]
mod ids;
#[path = "conformance/operator.rs"]
mod operator;
#[path = "conformance/stop.rs"]
mod stop;

/// The payload every test pushes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Job {
    n: u64,
}

/// Namespace of the Redis engine under test.
const NAMESPACE: &str = "test";

struct Harness {
    engine: Arc<dyn Engine>,
    memory: Option<MemoryEngine>,
    /// The Redis URL, and what keeps its servers running.
    redis: Option<(String, Box<dyn std::any::Any + Send + Sync>)>,
    /// The partitions of the queue under test.
    partitions: u16,
}

impl Harness {
    fn memory() -> Self {
        let memory = MemoryEngine::new();
        Self { engine: Arc::new(memory.clone()), memory: Some(memory), redis: None, partitions: 1 }
    }

    async fn redis() -> Self {
        let server = RedisServer::start();
        Self::on(server.url(), Box::new(server)).await
    }

    async fn cluster() -> Self {
        let cluster = Cluster::start(3, 0);
        Self::on(cluster.url(), Box::new(cluster)).await
    }

    /// A cluster, with the queue under test spread over four partitions.
    async fn partitioned() -> Self {
        Self { partitions: 4, ..Self::cluster().await }
    }

    async fn on(url: String, servers: Box<dyn std::any::Any + Send + Sync>) -> Self {
        let engine = RedisEngine::connect(&url, NAMESPACE).await.unwrap();
        Self { engine: Arc::new(engine), memory: None, redis: Some((url, servers)), partitions: 1 }
    }

    fn queue(&self, policy: Policy) -> Queue {
        let spec = QueueSpec::new("jobs", policy).unwrap().partitioned(self.partitions).unwrap();
        Queue::new(self.engine.clone(), spec)
    }

    /// Writes `value` under `field` of the queue's Redis hash `part` (`rec`, `keys`), behind the
    /// engine's back.
    async fn hset(&self, url: &str, q: &Queue, part: &str, field: &str, value: &str) {
        let mut conn = Link::open(url).await.unwrap();
        let hash = format!("{{{NAMESPACE}:{}}}:{part}", q.spec().name);
        let () = ::redis::cmd("HSET").arg(hash).arg(field).arg(value).query_async(&mut conn).await.unwrap();
    }

    /// Replaces task `id`'s stored record with `raw`, as a damaged or hand-edited record would be.
    async fn plant_record(&self, q: &Queue, id: &str, raw: &str) {
        match (&self.memory, &self.redis) {
            (Some(m), _) => m.plant_record(q.spec(), id, raw),
            (_, Some((url, _))) => self.hset(url, q, "rec", id, raw).await,
            _ => unreachable!("a harness has one engine"),
        }
    }

    /// Points `key` at task `id` in the queue's key map, whether or not that task exists.
    async fn plant_key(&self, q: &Queue, key: &str, id: &str) {
        match (&self.memory, &self.redis) {
            (Some(m), _) => m.plant_key(q.spec(), key, id),
            (_, Some((url, _))) => self.hset(url, q, "keys", key, id).await,
            _ => unreachable!("a harness has one engine"),
        }
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

/// `conformance!(everywhere: a::b, …; on a cluster too: c::d, …; memory and one Redis only: e::f,
/// …)`: the first list runs on memory, one Redis, a three-primary cluster and a cluster with the
/// queue in four partitions; the second on all but the partitioned queue (two rely on tasks of
/// different keys being taken or listed in push order, which a partitioned queue keeps within
/// each partition only; one plants a record by id in the queue's own keys, partition 0's); the
/// third on memory and one Redis. The first two hold one test of each kind of operation: what a
/// cluster routes.
macro_rules! conformance {
    ($($module:ident :: $name:ident),* ; $($cmodule:ident :: $cname:ident),* ; $($bmodule:ident :: $bname:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$module::$name(&super::Harness::memory()).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $cname() {
                    super::$cmodule::$cname(&super::Harness::memory()).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $bname() {
                    super::$bmodule::$bname(&super::Harness::memory()).await;
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$module::$name(&super::Harness::redis().await).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $cname() {
                    super::$cmodule::$cname(&super::Harness::redis().await).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $bname() {
                    super::$bmodule::$bname(&super::Harness::redis().await).await;
                }
            )*
        }
        mod cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$module::$name(&super::Harness::cluster().await).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $cname() {
                    super::$cmodule::$cname(&super::Harness::cluster().await).await;
                }
            )*
        }
        mod partitioned {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$module::$name(&super::Harness::partitioned().await).await;
                }
            )*
        }
    };
}

conformance!(
    delivery::keyed_push_dedupes_pending_and_keeps_one_follow_up,
    delivery::delayed_tasks_wait_for_their_time,
    delivery::expired_lease_is_delivered_again_to_any_worker,
    delivery::idle_worker_starts_a_newly_pushed_task,
    delivery::a_delayed_push_that_comes_soonest_wakes_a_waiting_worker,
    failures::failing_task_backs_off_then_goes_dead_with_its_last_error,
    failures::dead_tasks_can_be_listed_retried_and_purged,
    operator::status_by_key_follows_the_live_task,
    ids::follow_ups_become_tasks_with_new_random_ids;
    failures::counts_and_status_records_follow_each_state,
    corrupt::corrupt_record_in_a_batch_goes_dead_and_the_rest_is_taken,
    operator::pending_and_delayed_list_tasks_in_the_order_they_will_run;
    delivery::follow_up_merges_into_a_retrying_task,
    delivery::again_keeps_the_task_with_fresh_attempts_and_merges_a_follow_up,
    delivery::a_hurried_push_brings_a_waiting_task_forward_but_not_a_retry,
    delivery::renewed_lease_is_kept,
    delivery::handler_stuck_past_its_timeout_gives_the_task_back,
    failures::permanent_errors_skip_retries_and_retry_after_is_honoured,
    delivery::graceful_shutdown_finishes_in_flight_and_releases_the_rest,
    stop::a_stop_past_its_grace_hands_back_runs_cut_short_and_releases_the_rest,
    stop::a_worker_gone_without_a_stop_has_its_tasks_handed_back_when_the_next_joins,
    failures::tasks_past_their_deadline_fail,
    failures::undecodable_payload_goes_dead_without_stopping_the_worker,
    failures::finished_and_dead_records_are_trimmed,
    corrupt::push_replaces_a_live_task_whose_record_is_corrupt_or_missing,
    corrupt::finish_renew_and_expired_leases_survive_corrupt_records,
    corrupt::follow_up_of_a_corrupt_running_record_becomes_a_task,
    corrupt::dead_retry_leaves_corrupt_records_dead_and_purge_drops_them,
    corrupt::a_running_record_without_runs_is_finished_and_redelivered,
    ids::pushed_tasks_get_distinct_random_ids_kept_by_dedupe,
    ids::decimal_ids_of_older_records_stay_valid,
    delivery::backlog_of_50000_due_tasks_is_processed,
    operator::purge_pending_drops_a_large_backlog_but_not_running_tasks,
);
