//! Queue benchmark (run by `scripts/bench-queue` on a fresh `redis-server`): enqueue and
//! processing rates of our Redis backend and of apalis-redis 1.0 for N no-op tasks at
//! concurrency 32, the idle-worker pickup latency of ours, and `redis-benchmark -t lpush` on the
//! same server. The last line is
//! `queue-bench: ours=<tasks/s> apalis_redis=<tasks/s> ratio=<ours/apalis> redis_lpush=<ops/s>`.

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use apalis::prelude::*;
use apalis_redis::{Config, RedisStorage};
use clap::Parser;
use gce_backend_queues::testing::stoppable;
use gce_backend_queues::{Policy, Queue, QueueSpec, RedisEngine, When};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

#[derive(Debug, Parser)]
struct Args {
    /// Port of the fresh redis-server on 127.0.0.1.
    #[arg(long)]
    port: u16,
    /// Tasks per run.
    #[arg(long, default_value_t = 100_000)]
    n: u64,
    /// Tasks in flight per worker.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Single pushes measured for the pickup latency.
    #[arg(long, default_value_t = 200)]
    pickups: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    n: u64,
}

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

async fn flush(conn: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("FLUSHALL").query_async(conn).await.unwrap();
}

/// Redis's CPU seconds (user + system) and commands processed so far.
async fn redis_work(conn: &mut redis::aio::MultiplexedConnection) -> (f64, f64) {
    let info: String = redis::cmd("INFO").arg("all").query_async(conn).await.unwrap();
    let field = |name: &str| -> f64 {
        info.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok()).unwrap_or(0.0)
    };
    (field("used_cpu_user:") + field("used_cpu_sys:"), field("total_commands_processed:"))
}

/// What Redis did per task between two [`redis_work`] readings: CPU µs and commands.
fn per_task(before: (f64, f64), after: (f64, f64), n: u64) -> (f64, f64) {
    ((after.0 - before.0) * 1e6 / n as f64, (after.1 - before.1) / n as f64)
}

async fn wait_until(what: impl Fn() -> futures::future::BoxFuture<'static, bool>) {
    while !what().await {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn noop(_job: Job) -> Result<(), BoxDynError> {
    Ok(())
}

/// Ours: push N (1 000 per call), then one worker at `concurrency` drains the backlog.
async fn ours(url: &str, args: &Args) -> (f64, f64, Queue) {
    let engine = RedisEngine::connect(url, "bench").await.unwrap();
    let q = Queue::new(Arc::new(engine), QueueSpec::new("noop", Policy::default()).unwrap());
    let jobs: Vec<(String, Job)> = (0..args.n).map(|n| (format!("t{n}"), Job { n })).collect();
    let t = Instant::now();
    for chunk in jobs.chunks(1000) {
        q.push_many(chunk.iter().map(|(k, j)| (k.clone(), j)), When::Now).await.unwrap();
    }
    let enqueue = rate(args.n, t.elapsed());

    let t = Instant::now();
    let (backend, concurrency) = (q.backend::<Job>("bench"), args.concurrency);
    let w = WorkerBuilder::new("ours").backend(backend).concurrency(concurrency).build(noop);
    let (stop, handle) = stoppable(|stop| w.run_until(stop));
    let (qc, n) = (q.clone(), args.n);
    wait_until(move || {
        let qc = qc.clone();
        Box::pin(async move { qc.counts().await.unwrap().done >= n })
    })
    .await;
    let process = rate(args.n, t.elapsed());
    stop.send(()).unwrap();
    handle.await.unwrap().unwrap();
    let c = q.counts().await.unwrap();
    assert_eq!((c.done, c.dead, c.pending), (args.n, 0, 0), "ours: every task done once");
    (enqueue, process, q)
}

#[derive(Clone)]
struct Pickup {
    pushed: Arc<Mutex<HashMap<u64, Instant>>>,
    tx: mpsc::UnboundedSender<Duration>,
}

async fn picked(job: Job, ctx: Data<Pickup>) -> Result<(), BoxDynError> {
    let at = ctx.pushed.lock().unwrap()[&job.n];
    let _ = ctx.tx.send(at.elapsed());
    Ok(())
}

/// Ours: an idle worker, then single pushes; time from push to handler start.
async fn pickup(q: &Queue, samples: usize) -> (Duration, Duration) {
    let pushed: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let (tx, mut rx) = mpsc::unbounded_channel::<Duration>();
    let (backend, p) = (q.backend::<Job>("bench"), pushed.clone());
    let ctx = Pickup { pushed: p, tx };
    let w = WorkerBuilder::new("pickup").backend(backend).concurrency(32).data(ctx).build(picked);
    let (stop, handle) = stoppable(|stop| w.run_until(stop));
    let mut lat = Vec::with_capacity(samples);
    for i in 0..samples as u64 {
        // Let the worker go idle (parked on its blocking wait) before each push.
        tokio::time::sleep(Duration::from_millis(30)).await;
        pushed.lock().unwrap().insert(i, Instant::now());
        q.push(&format!("pickup-{i}"), &Job { n: i }, When::Now).await.unwrap();
        lat.push(rx.recv().await.unwrap());
    }
    stop.send(()).unwrap();
    handle.await.unwrap().unwrap();
    lat.sort();
    (lat[lat.len() / 2], lat[(lat.len() * 99).div_ceil(100) - 1])
}

/// apalis-redis 1.0 in the minimum safe configuration of apalis.md: lock_tasks(false), polled
/// every 100 ms. Pushed with push_bulk in chunks of 5 000; since its fetch dies on ≥ 8 000 due
/// scheduled tasks, the backlog is moved from `scheduled` to `active` in chunks of 5 000 before
/// its worker starts, so it also drains a preloaded backlog.
async fn apalis_redis(url: &str, args: &Args, raw: &mut redis::aio::MultiplexedConnection) -> (f64, f64) {
    let conn = apalis_redis::connect(url).await.unwrap();
    let config = Config::default().queue("apalis_noop").lock_tasks(false);
    let mut storage = RedisStorage::<Job, _>::new(conn).with_config(config.clone());
    let jobs: Vec<Job> = (0..args.n).map(|n| Job { n }).collect();
    let t = Instant::now();
    for chunk in jobs.chunks(5000) {
        storage.push_bulk(chunk.to_vec()).await.unwrap();
    }
    let enqueue = rate(args.n, t.elapsed());

    let promote = redis::Script::new(
        "local ids = redis.call('ZRANGE', KEYS[1], 0, 4999) \
         if #ids == 0 then return 0 end \
         redis.call('ZREM', KEYS[1], unpack(ids)) redis.call('RPUSH', KEYS[2], unpack(ids)) return #ids",
    );
    loop {
        let moved: u64 = promote
            .key(config.scheduled_jobs_set())
            .key(config.active_jobs_list())
            .invoke_async(raw)
            .await
            .unwrap();
        if moved == 0 {
            break;
        }
    }

    let t = Instant::now();
    let concurrency = args.concurrency;
    let w = WorkerBuilder::new("apalis-redis")
        .backend(storage.poll_with_interval(Duration::from_millis(100)))
        .concurrency(concurrency)
        .build(noop);
    let (stop, handle) = stoppable(|stop| w.run_until(stop));
    let (done_key, n, url) = (config.done_jobs_set(), args.n, url.to_owned());
    let mut probe = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap();
    loop {
        let done: u64 = redis::cmd("SCARD").arg(&done_key).query_async(&mut probe).await.unwrap();
        if done >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let process = rate(args.n, t.elapsed());
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), handle).await;
    (enqueue, process)
}

fn redis_lpush(port: u16) -> f64 {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q", "-t", "lpush", "-n", "200000"])
        .output()
        .expect("run redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    // "LPUSH: 118483.41 requests per second, p50=0.215 msec" (possibly after \r progress lines)
    text.rsplit(['\r', '\n'])
        .find_map(|l| l.trim().strip_prefix("LPUSH: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("cannot read redis-benchmark output: {text}"))
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let url = format!("redis://127.0.0.1:{}/0", args.port);
    let mut raw =
        redis::Client::open(url.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap();
    println!("queue-bench: N={} concurrency={} redis=127.0.0.1:{}", args.n, args.concurrency, args.port);

    flush(&mut raw).await;
    let before = redis_work(&mut raw).await;
    let (ours_enq, ours_proc, q) = ours(&url, &args).await;
    let (ours_us, ours_cmds) = per_task(before, redis_work(&mut raw).await, args.n);
    println!("ours:         enqueue {ours_enq:>9.0} tasks/s   process {ours_proc:>9.0} tasks/s");
    println!("ours:         Redis per task (push, take, ack): {ours_us:.1} us CPU, {ours_cmds:.1} commands");
    let (p50, p99) = pickup(&q, args.pickups).await;
    println!(
        "ours:         idle-worker pickup over {} single pushes: p50 {:.2} ms, p99 {:.2} ms",
        args.pickups,
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );

    flush(&mut raw).await;
    let before = redis_work(&mut raw).await;
    let (ap_enq, ap_proc) = apalis_redis(&url, &args, &mut raw).await;
    let (ap_us, ap_cmds) = per_task(before, redis_work(&mut raw).await, args.n);
    println!("apalis-redis: enqueue {ap_enq:>9.0} tasks/s   process {ap_proc:>9.0} tasks/s");
    println!("apalis-redis: Redis per task (push, take, ack): {ap_us:.1} us CPU, {ap_cmds:.1} commands");
    println!(
        "apalis-redis: lock_tasks(false), poll 100 ms; fed by push_bulk in chunks of 5000 and moved from scheduled to active in chunks of 5000 (its fetch dies on >= 8000 due tasks)"
    );

    flush(&mut raw).await;
    let lpush = redis_lpush(args.port);
    println!("redis-benchmark -t lpush -n 200000: {lpush:.0} ops/s");
    println!("ours/redis_lpush = {:.1}%", 100.0 * ours_proc / lpush);
    println!(
        "queue-bench: ours={:.0} apalis_redis={:.0} ratio={:.2} redis_lpush={:.0} redis_us_per_task={:.1}/{:.1}",
        ours_proc,
        ap_proc,
        ours_proc / ap_proc,
        lpush,
        ours_us,
        ap_us
    );
}
