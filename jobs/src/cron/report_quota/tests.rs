//! Unit tests of `cron/report_quota.rs`.

use super::*;
use crate::config::Secs;
use gce_backend_queues::Task;

/// 200 projects' tasks: all pushed, some at once, the rest at steps across the jitter.
async fn pushed(jitter: u64) -> (Vec<String>, Vec<gce_backend_queues::TaskStatus>) {
    let (mut ctx, _) = Ctx::test();
    ctx.settings.timing =
        std::sync::Arc::new(crate::config::Timing { fan_out_jitter: Secs(jitter), ..Default::default() });
    for i in 0..200 {
        ctx.seed_config_with(&format!("p{i}"), 1, |c| c.attributes.project = format!("project-{i:03}")).await;
    }
    let started = crate::ports::clock::Clock::now(&crate::ports::clock::SystemClock); // the queues run on the system clock
    assert_eq!(run(&ctx).await.unwrap(), 200);
    let due: Vec<String> = ctx.taken::<ReportQuota>().await.into_iter().map(|t| t.project).collect();
    let delayed = ctx.queues.get(ReportQuota::QUEUE).delayed(1000, 0).await.unwrap();
    for d in &delayed {
        let after = (d.run_at.unwrap() - started).num_milliseconds();
        assert!(after > 0 && after <= jitter as i64 * 1000, "{} due {after} ms after the tick", d.key);
    }
    assert_eq!(due.len() + delayed.len(), 200, "every project once");
    (due, delayed)
}

#[tokio::test]
async fn a_scans_tasks_are_spread_over_the_jitter_and_all_at_once_without_it() {
    let (due, delayed) = pushed(5).await;
    assert!(!due.is_empty() && !delayed.is_empty(), "due {} delayed {}", due.len(), delayed.len());
    let steps: std::collections::BTreeSet<_> = delayed.iter().map(|d| d.run_at).collect();
    assert!(steps.len() > 3, "spread over several steps: {steps:?}");
    let (due, delayed) = pushed(0).await;
    assert_eq!((due.len(), delayed.len()), (200, 0));
}
