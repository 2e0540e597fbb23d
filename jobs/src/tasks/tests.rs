//! Unit tests of `tasks/mod.rs`.

use super::*;

#[test]
fn task_keys_map_to_their_config() {
    assert_eq!(config_of("expand_config", "linux").as_deref(), Some("linux"));
    assert_eq!(config_of("manage_bot", "linux-x-3").as_deref(), Some("linux-x"));
    assert_eq!(config_of("destroy_instance", "linux-3@https://x/linux-3-ab12").as_deref(), Some("linux"));
    assert_eq!(config_of("audit_instances", "p/z"), None);
    assert_eq!(config_of("manage_bot", "garbage"), None);
}

#[tokio::test]
async fn a_corrupt_vm_is_rebuilt_around_its_instance_and_drained_or_dropped_without_one() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    let vm = ctx.seed_vm("linux-0", crate::testing::created(ctx.now())).await;
    let labels = [(crate::config::labels::VM, "linux-0"), (crate::config::labels::DEPLOYMENT, "test")];
    let inst = crate::testing::FakeCompute::instance(&vm.hostname, &labels);
    f.compute.instances.lock().unwrap().insert(vm.hostname.clone(), inst.clone());
    ctx.seed_vm("linux-1", |_| {}).await;
    f.store.plant_corrupt_vm("linux-0");
    f.store.plant_corrupt_vm("linux-1");
    assert!(ctx.vm("linux-0").await.unwrap().is_none(), "reads as absent while quarantined");
    let got = ctx.store.vm("linux-0").await.unwrap().unwrap().value;
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
    assert!(ctx.store.vm_version("linux-1").await.unwrap().is_none());
    assert_eq!(ctx.taken::<ExpandConfig>().await, [ExpandConfig { prefix: "linux".into() }]);
    let errors = ctx.store.errors("linux").await.unwrap();
    assert!(errors.iter().all(|e| e.code == "corrupt") && errors.len() == 2, "{errors:?}");
}

#[tokio::test]
async fn a_dead_task_is_counted_on_its_config() {
    let (ctx, _) = Ctx::test();
    let hook = dead_hook(ctx.store.clone(), ctx.clock.clone());
    let t = DeadTask {
        queue: "create_instance".into(),
        id: "7".into(),
        key: "linux-2".into(),
        attempts: 8,
        reason: "retries-exhausted".into(),
        error: "compute 503: busy".into(),
    };
    hook(t).await;
    assert_eq!(ctx.store.counter("linux", crate::model::counters::DEAD_TASKS).await.unwrap(), 1);
    let e = &ctx.store.errors("linux").await.unwrap()[0];
    assert_eq!((e.stage.as_str(), e.code.as_str()), ("create_instance", "dead"));
    assert!(e.message.contains("linux-2") && e.message.contains("8 runs"), "{e:?}");
}
