//! Unit tests of `tasks/expand_config.rs`.

use crate::work::{CreateVm, DrainVm};

use super::*;

#[tokio::test]
async fn pushes_create_vm_for_missing_ids_only() {
    let (ctx, _) = Ctx::test();
    run(&ctx, ExpandConfig { prefix: "none".into() }).await.unwrap();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-1", |_| {}).await;
    let next = run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    let ids: Vec<String> = ctx.taken::<CreateVm>().await.into_iter().map(|t| t.id).collect();
    assert_eq!(ids, ["linux-0", "linux-2"]);
    assert_eq!(next, Next::Done, "nothing left: no second batch");
}

#[tokio::test]
async fn a_large_amount_goes_out_in_batches_that_reread_the_config() {
    let (mut ctx, _) = Ctx::test();
    ctx.limits = std::sync::Arc::new(crate::config::Limits {
        expand_batch: 4,
        creating_per_config: 6,
        ..Default::default()
    });
    ctx.seed_config("linux", 10).await;
    let next = run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert_eq!(ctx.taken::<CreateVm>().await.len(), 4, "one batch");
    assert_eq!(next, Next::After(BATCH_PAUSE), "it looks again for the rest");
    // Four VMs now wait for their instance: only two more fit under creating_per_config.
    for i in 0..4 {
        ctx.seed_vm(&format!("linux-{i}"), |_| {}).await;
    }
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    let ids: Vec<String> = ctx.taken::<CreateVm>().await.into_iter().map(|t| t.id).collect();
    assert_eq!(ids, ["linux-4", "linux-5"]);
    // The amount is lowered between batches: the next one creates nothing more.
    let cfg = ctx.store.config("linux").await.unwrap().unwrap();
    let mut rec = cfg.value;
    rec.config.amount.min = 4;
    rec.config.amount.max = 4;
    rec.current_amount = 4;
    ctx.store.put_config(&rec, Expect::Version(cfg.version)).await.unwrap();
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert!(ctx.taken::<CreateVm>().await.is_empty());
    let drained: Vec<String> = ctx.taken::<DrainVm>().await.into_iter().map(|t| t.id).collect();
    assert!(drained.is_empty(), "nothing past 4 exists yet: {drained:?}");
}

#[tokio::test]
async fn a_shrink_drains_the_surplus_at_once() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    for id in ["linux-0", "linux-1", "linux-2"] {
        ctx.seed_vm(id, |_| {}).await;
    }
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    let ids: Vec<String> = ctx.taken::<DrainVm>().await.into_iter().map(|t| t.id).collect();
    assert_eq!(ids, ["linux-1", "linux-2"]);
}

#[tokio::test]
async fn a_paused_config_creates_nothing_and_still_drains_its_surplus() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    for id in ["linux-0", "linux-3"] {
        ctx.seed_vm(id, |_| {}).await;
    }
    crate::operate::pause(&ctx, "linux", "rollout", "bob").await.unwrap();
    let next = run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert_eq!(next, Next::Done, "resuming pushes it again");
    assert!(ctx.taken::<CreateVm>().await.is_empty());
    assert_eq!(ctx.taken::<DrainVm>().await, [DrainVm { id: "linux-3".into() }]);
}
