//! Unit tests of `tasks/audit_instances.rs`.

use super::*;
use crate::testing::{FakeCompute, created};
use crate::ports::compute::Instance;

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
    let marks: Vec<String> = ctx.ports.store.marks(LEAKS).await.unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(marks, ["test-project/z/linux-7-lost"], "only ours, and only without a VM");
    assert!(!f.compute.calls().iter().any(|c| c.starts_with("delete")), "not before the grace");
    f.clock.advance(ctx.settings.timing.leak_grace.chrono() + chrono::Duration::seconds(1));
    run(&ctx, t()).await.unwrap();
    let deletes: Vec<String> =
        f.compute.calls().into_iter().filter(|c| c.starts_with("delete")).collect();
    assert_eq!(deletes, [format!("delete linux-7-lost {}", request_id("plug-linux-7-lost"))]);
    assert!(f.compute.instances.lock().unwrap().contains_key("other-1-x"), "never touched");
    // Gone now: the mark goes too.
    run(&ctx, t()).await.unwrap();
    assert!(ctx.ports.store.marks(LEAKS).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_candidate_that_gets_its_vm_is_unmarked() {
    let (ctx, f) = Ctx::test();
    let i = FakeCompute::instance("linux-0-abcd", &[(labels::DEPLOYMENT, "test")]);
    f.compute.instances.lock().unwrap().insert(i.name.clone(), i);
    let t = || AuditInstances { project: "test-project".into(), zone: "z".into() };
    run(&ctx, t()).await.unwrap();
    assert_eq!(ctx.ports.store.marks(LEAKS).await.unwrap().len(), 1);
    ctx.seed_vm("linux-0", created(ctx.now())).await; // adopted after a 409, say
    run(&ctx, t()).await.unwrap();
    assert!(ctx.ports.store.marks(LEAKS).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_instance_whose_vm_record_was_lost_is_adopted_not_deleted() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    // linux-2's record survived, under another incarnation than this instance's.
    let kept = ctx.seed_vm("linux-2", created(ctx.now())).await;
    let ours = |vm: &str, extra: &[(&'static str, &str)]| {
        let mut l = vec![(labels::DEPLOYMENT, "test"), (labels::CONFIG, "linux")];
        l.extend_from_slice(extra);
        let name = format!("{vm}-{}", &"abcdefgh"[..4]);
        FakeCompute::instance(&name, &l)
    };
    let lost = ours("linux-1", &[(labels::VM, "linux-1")]);
    let bulk = ours("linux-0", &[]); // made in bulk: no VM label, the name says it
    let mut old = ours("linux-2", &[]); // an old incarnation of a VM whose record lives
    old.name = "linux-2-oldx".into();
    assert_ne!(old.name, kept.hostname);
    let beyond = ours("linux-5", &[]); // an index the Config no longer wants
    let mut stopping = ours("linux-1", &[]);
    stopping.name = "linux-1-zzzz".into();
    stopping.status = "STOPPING".into();
    for i in [&lost, &bulk, &old, &beyond, &stopping] {
        f.compute.instances.lock().unwrap().insert(i.name.clone(), i.clone());
    }
    let t = || AuditInstances { project: "test-project".into(), zone: "z".into() };
    run(&ctx, t()).await.unwrap();

    for (id, instance) in [("linux-1", &lost), ("linux-0", &bulk)] {
        let vm = ctx.ports.store.vm(id).await.unwrap().expect("adopted").value;
        assert_eq!(vm.hostname, instance.name);
        let placed = vm.instance.as_ref().expect("it keeps its instance");
        assert_eq!((placed.url.as_str(), placed.created), (instance.url.as_str(), instance.created));
    }
    assert_eq!(ctx.ports.store.vm("linux-2").await.unwrap().unwrap().value.hostname, kept.hostname);
    assert!(ctx.ports.store.vm("linux-5").await.unwrap().is_none());
    let mut marks: Vec<String> = ctx.ports.store.marks(LEAKS).await.unwrap().into_iter().map(|(k, _)| k).collect();
    marks.sort();
    let leak = |i: &Instance| format!("test-project/z/{}", i.name);
    let mut leaks = vec![leak(&stopping), leak(&old), leak(&beyond)];
    leaks.sort();
    assert_eq!(marks, leaks);
    assert!(!f.compute.calls().iter().any(|c| c.starts_with("insert")), "nothing is made again");
}

