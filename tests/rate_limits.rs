//! Rate limits per Compute project on Redis and the simulator: two processes share one bucket
//! (the inserts the simulator saw never exceed it; one insert per VM here, bulks are
//! `tests/bulk.rs`'s), and a throttled project never holds up another.

use std::time::Duration;

use gce_backend_jobs::ports::buckets::Rate;
use gce_backend_jobs::ports::rated::ProjectRates;
use gce_backend_queues::testing::eventually;
use tokio::time::Instant;

use crate::support::Procs;
use crate::support::{Backend, Env, pool, settings, sim_config};

const RATE: f64 = 20.0;
const BURST: usize = 20;

/// The most arrivals in any window of `span` (arrival times sorted).
fn most_within(times: &[Instant], span: Duration) -> usize {
    let mut best = 0;
    let mut start = 0;
    for (i, t) in times.iter().enumerate() {
        while *t - times[start] >= span {
            start += 1;
        }
        best = best.max(i + 1 - start);
    }
    best
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_never_insert_faster_than_their_projects_bucket() {
    let limits = format!(
        "[limits]\nexpand_batch = 1000\ncreating_per_config = 1000\nbulk_min = 5000\nbulk_max = 5000\n[rate_limits]\nmutate = {{rate = {RATE:.1}, burst = {BURST}}}\n"
    );
    let env = Procs::start(32, &limits).await;
    // 300 by default; GCE_BACKEND_RATE_VMS=2000 for the figure (about 100 s).
    let n: u32 = std::env::var("GCE_BACKEND_RATE_VMS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    std::fs::write(env.configs.join("big.yaml"), pool("big", n, "1d", "10m")).unwrap();
    let (a, b) = (env.spawn(), env.spawn());
    let ctx = env.ctx().await;
    let limit = Duration::from_secs(60 + (f64::from(n) / RATE) as u64);
    eventually("two processes create every instance", limit, || async {
        let c =
            gce_backend_jobs::records::counts::tally(&*ctx.ports.store, "big", ctx.now()).await.unwrap().0;
        (c.created == n).then_some(())
    })
    .await;
    let mut times = env.sim.with(|w| w.insert_times.clone());
    times.sort();
    assert!(times.len() >= n as usize, "{} inserts", times.len());
    // A token bucket allows at most burst + rate × T calls in any window of T; the simulator
    // sees them up to a little later than they were granted (allowed: a quarter second's
    // worth, and one for the window's edge). Unlimited, 300 come within a second.
    let slack = 1 + (RATE / 4.0).ceil() as usize;
    for secs in [1, 5] {
        let most = most_within(&times, Duration::from_secs(secs));
        let bound = BURST + (RATE * secs as f64) as usize + slack;
        assert!(most <= bound, "{most} inserts within {secs}s (bound {bound})");
    }
    let span = times[times.len() - 1] - times[0];
    let bound = BURST as f64 + RATE * span.as_secs_f64() + slack as f64;
    assert!((times.len() as f64) <= bound, "{} inserts in {span:?}", times.len());
    println!(
        "rate-limit: inserts={} span_s={:.1} most_in_1s={}",
        times.len(),
        span.as_secs_f64(),
        most_within(&times, Duration::from_secs(1))
    );
    env.stop(&mut [a, b]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_project_never_holds_up_another() {
    throttled(Backend::Redis).await;
}

/// The same on a cluster whose store is in key layout 2 (each project's buckets in a slot of
/// their own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_project_never_holds_up_another_on_a_cluster_in_layout_2() {
    throttled(Backend::ClusterLayout2).await;
}

async fn throttled(backend: Backend) {
    let mut s = settings();
    let slow = Rate { rate: 0.02, burst: 1 };
    s.rate_limits
        .projects
        .insert("slow-proj".into(), ProjectRates { mutate: Some(slow), ..Default::default() });
    let env = Env::start_with(backend, sim_config(), &[], true, s).await;
    env.write_pool(
        "slowp",
        &pool("slowp", 10, "1d", "10m").replace("project: my-proj", "project: slow-proj"),
    );
    env.write_pool("fastp", &pool("fastp", 10, "1d", "10m"));
    env.converged("fastp", 10).await;
    // 10 inserts at 0.02/s (a burst of 1) take 450 s, far longer than any run of this test: the
    // other project converged without waiting for them.
    let c = env.counts("slowp").await;
    assert!(c.created < 10, "slowp: {c:?}");
    let st = env.status("slowp", true).await;
    assert_eq!((st.task_failures, st.dead_tasks), (0, 0), "held back, not failed: {:?}", st.errors);
    let text = env.ctx.metrics.text();
    // A project's series may read 0 (its Config was stored at start) or be absent: not held back.
    let held = |project: &str| -> Option<u64> {
        let series =
            format!("gce_backend_compute_throttled_total{{project=\"{project}\",class=\"mutate\"}} ");
        text.lines().find_map(|l| l.strip_prefix(series.as_str())).map(|n| n.parse().unwrap())
    };
    assert!(held("slow-proj").is_some_and(|n| n > 0), "{text}");
    assert_eq!(held("my-proj").unwrap_or(0), 0, "the other project was never held back: {text}");
    // Status and the shared metrics show the saturated bucket (read from Redis), not the other.
    let report = env.report(true).await;
    let level = |p: &str| report.rate_limits.iter().find(|l| l.project == p && l.class == "mutate");
    let b = level("slow-proj").expect("slow's bucket");
    assert!(b.saturated && b.waits > 0 && b.configured == 0.02 && b.burst == 1, "{b:?}");
    assert!(level("my-proj").is_none(), "no limit set for my-proj: no bucket");
    let shared = gce_backend::metrics::Metrics::new(env.ctx.clone(), true).render().await;
    let line = |name: &str| {
        shared
            .lines()
            .find(|l| l.starts_with(&format!("gce_backend_{name}{{project=\"slow-proj\",class=\"mutate\"}}")))
            .unwrap_or_else(|| panic!("{name} missing:\n{shared}"))
            .to_owned()
    };
    assert!(line("rate_limit_saturated").ends_with(" 1"), "{shared}");
    let waits: u64 = line("rate_limit_waits_total").rsplit_once(' ').unwrap().1.parse().unwrap();
    assert!(waits >= b.waits, "the shared count of takes that found no token (read later): {waits}");
    assert!(line("rate_limit_rate").ends_with(" 0.02"), "{}", line("rate_limit_rate"));
    env.stop().await;
}
