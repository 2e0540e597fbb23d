//! Unit tests of `tasks/destroy_instance.rs`.

use crate::work::DeleteBot;

use super::*;
use crate::env::request_id;
use crate::ports::compute::{ComputeError, Operation};
use crate::testing::created;

#[tokio::test]
async fn a_late_task_for_another_incarnation_does_nothing() {
    let (ctx, f) = Ctx::test();
    ctx.seed_vm("linux-0", created(ctx.now())).await;
    run(&ctx, DestroyInstance { id: "linux-0".into(), url: "https://old/url".into() }).await.unwrap();
    run(&ctx, DestroyInstance { id: "linux-9".into(), url: "x".into() }).await.unwrap();
    assert!(f.compute.calls().is_empty());
}

#[tokio::test]
async fn deletes_with_a_deterministic_request_id_and_already_gone_counts_as_done() {
    let (ctx, f) = Ctx::test();
    let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
    run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
    assert_eq!(
        f.compute.calls(),
        [format!("delete linux-0-abcd {}", request_id("destroy-linux-0-abcd"))]
    );
    // Run again before delete_bot (a duplicate task): the deletion is counted once.
    run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
    let m = ctx.metrics.text();
    let ok = r#"gce_backend_instance_operations_total{config="linux",zone="z",op="delete",result="ok",code=""} 1"#;
    assert!(m.lines().any(|l| l == ok), "{m}");
    assert!(m.lines().any(|l| l == r#"gce_backend_vm_lifetime_seconds_count{config="linux"} 1"#), "{m}");
    assert_eq!(ctx.taken::<DeleteBot>().await, [DeleteBot { id: vm.id, hostname: vm.hostname }]);
}

#[tokio::test]
async fn a_failed_operation_is_recorded_and_retried_with_a_new_request_id() {
    let (ctx, f) = Ctx::test();
    let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
    let inst = crate::testing::FakeCompute::instance(&vm.hostname, &[]);
    f.compute.instances.lock().unwrap().insert(vm.hostname.clone(), inst);
    let failed = Operation {
        name: "op".into(),
        done: true,
        error: Some(ComputeError::from_operation("INTERNAL_ERROR", Some(500), "x")),
    };
    f.compute.deletes.lock().unwrap().push_back(Ok(Some(failed)));
    let e = run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap_err();
    assert_eq!(e.class(), crate::Class::Transient);
    assert!(ctx.taken::<DeleteBot>().await.is_empty());
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap()[0].code, "INTERNAL_ERROR");
    run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
    let last = f.compute.calls().into_iter().rev().find(|c| c.starts_with("delete")).unwrap();
    assert_eq!(last, format!("delete linux-0-abcd {}", request_id("destroy-linux-0-abcd-1")));
    assert_eq!(ctx.taken::<DeleteBot>().await.len(), 1);
}

#[tokio::test]
async fn a_failed_operation_on_an_instance_already_gone_counts_as_done() {
    let (ctx, f) = Ctx::test();
    let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
    let failed = Operation {
        name: "op".into(),
        done: true,
        error: Some(ComputeError::from_operation("RESOURCE_NOT_FOUND", Some(404), "x")),
    };
    f.compute.deletes.lock().unwrap().push_back(Ok(Some(failed)));
    run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
    assert_eq!(ctx.taken::<DeleteBot>().await.len(), 1);
}

#[tokio::test]
async fn a_pending_delete_is_followed_with_zone_operations_get_until_done() {
    let (ctx, f) = Ctx::test();
    let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
    let pending = Operation { name: "op-9".into(), done: false, error: None };
    f.compute.deletes.lock().unwrap().push_back(Ok(Some(pending.clone())));
    let next = run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
    assert_eq!(next, Next::After(std::time::Duration::from_millis(250)), "no worker waits on it");
    assert_eq!(ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value.operation, "op-9");
    f.compute.operations.lock().unwrap().push_back(Ok(Some(pending)));
    f.clock.advance(chrono::Duration::seconds(2));
    let next = run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
    assert_eq!(next, Next::After(std::time::Duration::from_secs(2)), "twice as late");
    assert!(ctx.taken::<DeleteBot>().await.is_empty());
    run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
    let rid = request_id("destroy-linux-0-abcd");
    assert_eq!(
        f.compute.calls(),
        [format!("delete linux-0-abcd {rid}"), "operation op-9".into(), "operation op-9".into()],
        "the delete is sent once"
    );
    assert_eq!(ctx.taken::<DeleteBot>().await.len(), 1);
}
