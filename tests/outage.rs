//! A Compute outage on Redis and the simulator: `gce-backend run` as a process while the
//! simulator's Compute is silent (faults `compute_hang`) and Configs grow, shrink and appear.
//! The open circuit holds tasks back instead of failing them: no task dies, the fleet converges
//! once Compute is back, and the log says the outage once rather than once per task.

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use gce_backend_jobs::Ctx;
use gce_backend_queues::testing::eventually;

use crate::support::Procs;
use crate::support::pool;

/// How long Compute stays silent: long enough that, were the timeouts of calls let through
/// while the breaker is open counted as failures, the tasks behind them would spend their 5
/// attempts (a breaker cycle below is 3 s: open for 1 s, then a 2 s timeout; the same test with
/// them counted made dead tasks). `scripts/chaos --bad-input` runs 90 s.
const OUTAGE: Duration = Duration::from_secs(45);

/// Breaker and timings for a short test: Compute calls time out after 2 s, three in a row open
/// the breaker for 1 s (not doubling, so it is tried often); the reconcile timings are the
/// pipeline tests' ones.
const SETTINGS: &str = r#"[isolation]
trip_after = 3
open_base = "1s"
open_cap = "1s"
compute_timeout = "2s"
[timing]
watch = "1s"
bot_grace = "3s"
observation_ttl = "2s"
leak_grace = "2s"
stale_bot_grace = "2s"
backoff_base = "1s"
backoff_cap = "2s"
config_delete_grace = "2s"
operation_poll = "1s"
fan_out_jitter = "1s"
"#;

/// Waits until every Config of `want` has its amount of VMs, all created and connected.
async fn converged(ctx: &Ctx, want: &[(&str, u32)], limit: Duration) {
    eventually(&format!("{want:?} converge"), limit, || async {
        for (prefix, n) in want {
            let c = gce_backend_jobs::records::counts::tally(&*ctx.ports.store, prefix, ctx.now())
                .await
                .unwrap()
                .0;
            if !(c.configured == *n && c.created == *n && c.connected == *n && c.draining == 0) {
                return None;
            }
        }
        Some(())
    })
    .await;
}

/// The tasks in the dead sets of every pipeline queue.
async fn dead_tasks(ctx: &Ctx) -> Vec<String> {
    let mut out = Vec::new();
    for q in gce_backend_jobs::tasks::QUEUES {
        for t in ctx.queues.get(q).dead(1000).await.unwrap() {
            out.push(format!("{q}: {t:?}"));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compute_outage_makes_no_dead_task_and_few_warnings_and_the_fleet_converges() {
    let env = Procs::start(8, SETTINGS).await;
    for (prefix, n) in [("alpha", 10), ("bravo", 10)] {
        std::fs::write(env.configs.join(format!("{prefix}.yaml")), pool(prefix, n, "1d", "10m")).unwrap();
    }
    let log_path = env.dir.join("run.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let run = env
        .command()
        .args(["--listen", "127.0.0.1:0", "--root-url", "http://localhost"])
        .env("RUST_LOG", "warn,gce_backend=info,gce_backend_jobs=info,gce_backend_queues=info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log.try_clone().unwrap())
        .spawn()
        .unwrap();
    let ctx = env.ctx().await;
    converged(&ctx, &[("alpha", 10), ("bravo", 10)], Duration::from_secs(90)).await;

    // Compute goes silent; meanwhile one Config grows, one shrinks and one is added.
    let from = std::fs::metadata(&log_path).unwrap().len();
    env.sim.with(|w| w.faults.compute_hang = true);
    for (prefix, n) in [("alpha", 14), ("bravo", 6), ("charlie", 5)] {
        std::fs::write(env.configs.join(format!("{prefix}.yaml")), pool(prefix, n, "1d", "10m")).unwrap();
    }
    tokio::time::sleep(OUTAGE).await;
    env.sim.with(|w| w.faults.compute_hang = false);
    converged(&ctx, &[("alpha", 14), ("bravo", 6), ("charlie", 5)], Duration::from_secs(120)).await;

    let mut text = String::new();
    let mut f = std::fs::File::open(&log_path).unwrap();
    f.seek(SeekFrom::Start(from)).unwrap();
    f.read_to_string(&mut text).unwrap();
    let warns: Vec<&str> = text.lines().filter(|l| l.contains(" WARN ")).collect();
    let opened = warns.iter().filter(|l| l.contains("circuit open")).count();
    let dead = dead_tasks(&ctx).await;
    println!("outage: dead_tasks={} warn_lines={} circuit_open_warns={opened}", dead.len(), warns.len());
    assert!(dead.is_empty(), "no task dies of the outage: {dead:#?}");
    assert_eq!(
        opened,
        1,
        "the circuit's opening is said once (one process, one project):\n{}",
        warns.join("\n")
    );
    assert!(text.contains("circuit closed"), "and its closing once Compute answers again");
    assert!(warns.len() < 50, "{} WARN lines during the outage:\n{}", warns.len(), warns.join("\n"));
    for prefix in ["alpha", "bravo", "charlie"] {
        let st = gce_backend_jobs::fleet::status::status(
            &*ctx.ports.store,
            prefix,
            ctx.now(),
            chrono::Duration::zero(),
            true,
        )
        .await
        .unwrap();
        assert_eq!(st.dead_tasks, 0, "{prefix}: {:?}", st.errors);
    }
    env.stop(&mut [run]);
}
