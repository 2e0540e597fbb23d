//! Unit tests of `writes.rs`.

use crate::ctx::Ctx;
use crate::work::{ExpandConfig, ManageBot};

#[tokio::test]
async fn a_corrupt_vm_is_rebuilt_around_its_instance_and_drained_or_dropped_without_one() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    let vm = ctx.seed_vm("linux-0", crate::testing::created(ctx.now())).await;
    // Made in bulk: no VM label, its name tells (instances made alone have one too).
    use crate::config::labels::{BATCH, CONFIG, DEPLOYMENT};
    let labels = [(CONFIG, "linux"), (DEPLOYMENT, "test"), (BATCH, "b")];
    let inst = crate::testing::FakeCompute::instance(&vm.hostname, &labels);
    f.compute.instances.lock().unwrap().insert(vm.hostname.clone(), inst.clone());
    ctx.seed_vm("linux-1", |_| {}).await;
    f.store.plant_corrupt_vm("linux-0");
    f.store.plant_corrupt_vm("linux-1");
    assert!(ctx.vm("linux-0").await.unwrap().is_none(), "reads as absent while quarantined");
    let got = ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value;
    assert_eq!(
        (got.hostname.as_str(), got.url(), got.drained),
        (vm.hostname.as_str(), Some(inst.url.as_str()), true)
    );
    assert_eq!(
        ctx.taken::<ManageBot>().await,
        [ManageBot { id: "linux-0".into() }],
        "the normal path takes over"
    );
    // No instance for linux-1: dropped, and the Config expanded again.
    assert!(ctx.vm("linux-1").await.unwrap().is_none());
    assert!(ctx.ports.store.vm_version("linux-1").await.unwrap().is_none());
    assert_eq!(ctx.taken::<ExpandConfig>().await, [ExpandConfig { prefix: "linux".into() }]);
    let errors = ctx.ports.store.errors("linux").await.unwrap();
    assert!(errors.iter().all(|e| e.code == "corrupt") && errors.len() == 2, "{errors:?}");
}
