//! Unit tests of `tasks/mod.rs`.

use super::*;

#[tokio::test]
async fn a_dead_task_is_counted_on_its_config() {
    let (ctx, _) = Ctx::test();
    let hook = dead_hook(ctx.ports.store.clone(), ctx.ports.clock.clone());
    let t = DeadTask {
        queue: "create_instance".into(),
        id: "7".into(),
        key: "linux-2".into(),
        attempts: 8,
        reason: "retries-exhausted".into(),
        error: "compute 503: busy".into(),
    };
    hook(t).await;
    assert_eq!(ctx.ports.store.counter("linux", crate::model::counters::DEAD_TASKS).await.unwrap(), 1);
    let e = &ctx.ports.store.errors("linux").await.unwrap()[0];
    assert_eq!(
        (e.stage.as_str(), e.code.as_str(), e.vm.as_deref()),
        ("create_instance", "dead", Some("linux-2"))
    );
    assert!(e.message.contains("linux-2") && e.message.contains("8 runs"), "{e:?}");
}
