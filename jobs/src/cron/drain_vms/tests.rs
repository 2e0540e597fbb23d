//! Unit tests of `cron/drain_vms.rs`.

use crate::work::DrainVm;

use super::*;

#[tokio::test]
async fn a_broken_index_of_one_config_does_not_stop_the_others() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    ctx.seed_config("mac", 1).await;
    for id in ["linux-0", "linux-1", "mac-0", "mac-1"] {
        ctx.seed_vm(id, |_| {}).await;
    }
    f.store.plant_broken_index("linux");
    run(&ctx).await.unwrap();
    assert_eq!(ctx.taken::<DrainVm>().await, [DrainVm { id: "mac-1".into() }]);
    let e = &ctx.ports.store.errors("linux").await.unwrap()[0];
    assert_eq!((e.stage.as_str(), e.code.as_str()), ("index", "unreadable"));
    run(&ctx).await.unwrap();
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap().len(), 1, "reported once while it lasts");
}
