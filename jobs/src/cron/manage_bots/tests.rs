//! Unit tests of `cron/manage_bots.rs`.

use chrono::Duration as D;

use super::*;
use crate::testing::created;

#[tokio::test]
async fn due_vms_are_pushed_and_the_others_only_by_the_sweep() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_config("mac", 1).await;
    // Lifetime 1 day from creation (the test VMs' lifetime).
    ctx.seed_vm("linux-0", created(ctx.now() - D::days(2))).await;
    ctx.seed_vm("linux-1", created(ctx.now())).await;
    ctx.seed_vm("linux-2", |_| {}).await;
    ctx.seed_vm("mac-0", created(ctx.now() - D::days(2))).await;
    crate::operate::pause(&ctx, "mac", "rollout", "bob").await.unwrap();
    run(&ctx).await.unwrap();
    let first = ctx.taken::<ManageBot>().await;
    assert_eq!(first, [ManageBot { id: "linux-0".into() }], "due, not paused");
    // A sweep period later, every VM with an instance has been swept (linux-0's task is
    // still running: the pushes for it become its follow-up).
    let mut swept: BTreeSet<String> = first.into_iter().map(|t| t.id).collect();
    let mut added = 0;
    for _ in 0..(4 * 60) {
        f.clock.advance(D::minutes(1));
        added += run(&ctx).await.unwrap();
        swept.extend(ctx.taken::<ManageBot>().await.into_iter().map(|t| t.id));
    }
    // linux-1 and mac-0 once each, linux-0's follow-up once: no per-tick fan-out.
    assert_eq!(added, 3, "tasks added over 240 ticks");
    let want: BTreeSet<String> = ["linux-0", "linux-1", "mac-0"].map(String::from).into();
    assert_eq!(swept, want, "each VM with an instance, and none without");
}

#[test]
fn each_place_of_the_period_falls_in_exactly_one_window() {
    let period = 3_600_000;
    let t0 = DateTime::<Utc>::from_timestamp_millis(1_700_000_000_123).unwrap();
    for id in ["a-0", "linux-17", "b-99"] {
        let p = place(id, period);
        let hits =
            (0..60).filter(|m| in_window(p, t0 + D::minutes(*m), t0 + D::minutes(m + 1), period)).count();
        assert_eq!(hits, 1, "{id} at {p}");
    }
    assert!(in_window(0, t0, t0 + D::hours(2), period), "a gap longer than the period sweeps all");
}

#[tokio::test]
async fn vms_written_before_the_deadline_index_are_indexed_once() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    ctx.seed_vm("linux-0", created(ctx.now() - D::days(2))).await;
    f.store.forget_deadlines();
    assert!(ctx.ports.store.vm_ids(VmIndex::DueBy(ctx.now())).await.unwrap().is_empty());
    // Written by this build (indexed): left as it is.
    ctx.seed_vm("linux-1", created(ctx.now())).await;
    let fresh = ctx.ports.store.vm_version("linux-1").await.unwrap();
    run(&ctx).await.unwrap();
    assert_eq!(ctx.taken::<ManageBot>().await, [ManageBot { id: "linux-0".into() }]);
    assert_eq!(ctx.ports.store.vm_version("linux-1").await.unwrap(), fresh, "an indexed VM is not written");
    let version = ctx.ports.store.vm_version("linux-0").await.unwrap();
    run(&ctx).await.unwrap();
    assert_eq!(ctx.ports.store.vm_version("linux-0").await.unwrap(), version, "only once");
}
