//! Unit tests of `tasks/drain_vm.rs`.

use crate::work::ManageBot;

use super::*;
use crate::testing::created;

#[tokio::test]
async fn only_vms_past_the_amount_are_drained() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    ctx.seed_vm("linux-0", created(ctx.now())).await;
    ctx.seed_vm("linux-1", created(ctx.now())).await;
    run(&ctx, DrainVm { id: "linux-0".into() }).await.unwrap();
    run(&ctx, DrainVm { id: "linux-1".into() }).await.unwrap();
    assert!(!ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value.drained);
    assert!(ctx.ports.store.vm("linux-1").await.unwrap().unwrap().value.drained);
    assert_eq!(ctx.taken::<ManageBot>().await, [ManageBot { id: "linux-1".into() }]);
}

#[tokio::test]
async fn a_vm_of_a_removed_config_never_sent_to_gce_is_dropped() {
    let (ctx, _) = Ctx::test();
    ctx.seed_vm("linux-0", |_| {}).await;
    run(&ctx, DrainVm { id: "linux-0".into() }).await.unwrap();
    assert!(ctx.ports.store.vm("linux-0").await.unwrap().is_none());
}
