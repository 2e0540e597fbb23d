//! Unit tests of `tasks/audit_instances.rs`.

use super::*;
use crate::testing::{FakeCompute, created};

#[tokio::test]
async fn leaks_are_marked_then_deleted_after_the_grace_and_foreign_or_owned_instances_are_left() {
    let (ctx, f) = Ctx::test();
    let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
    for (name, deployment) in
        [("linux-7-lost", "test"), ("other-1-x", "someone-else"), (vm.hostname.as_str(), "test")]
    {
        let i = FakeCompute::instance(name, &[(labels::DEPLOYMENT, deployment)]);
        f.compute.instances.lock().unwrap().insert(name.to_owned(), i);
    }
    let t = || AuditInstances { project: "test-project".into(), zone: "z".into() };
    run(&ctx, t()).await.unwrap();
    let marks: Vec<String> = ctx.store.marks(LEAKS).await.unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(marks, ["test-project/z/linux-7-lost"], "only ours, and only without a VM");
    assert!(!f.compute.calls().iter().any(|c| c.starts_with("delete")), "not before the grace");
    f.clock.advance(ctx.timing.leak_grace.chrono() + chrono::Duration::seconds(1));
    run(&ctx, t()).await.unwrap();
    let deletes: Vec<String> =
        f.compute.calls().into_iter().filter(|c| c.starts_with("delete")).collect();
    assert_eq!(deletes, [format!("delete linux-7-lost {}", request_id("plug-linux-7-lost"))]);
    assert!(f.compute.instances.lock().unwrap().contains_key("other-1-x"), "never touched");
    // Gone now: the mark goes too.
    run(&ctx, t()).await.unwrap();
    assert!(ctx.store.marks(LEAKS).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_candidate_that_gets_its_vm_is_unmarked() {
    let (ctx, f) = Ctx::test();
    let i = FakeCompute::instance("linux-0-abcd", &[(labels::DEPLOYMENT, "test")]);
    f.compute.instances.lock().unwrap().insert(i.name.clone(), i);
    let t = || AuditInstances { project: "test-project".into(), zone: "z".into() };
    run(&ctx, t()).await.unwrap();
    assert_eq!(ctx.store.marks(LEAKS).await.unwrap().len(), 1);
    ctx.seed_vm("linux-0", created(ctx.now())).await; // adopted after a 409, say
    run(&ctx, t()).await.unwrap();
    assert!(ctx.store.marks(LEAKS).await.unwrap().is_empty());
}
