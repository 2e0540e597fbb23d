//! Unit tests of `tasks/inspect_instances.rs` (and the Compute Engine provider's scan,
//! `providers/gce_scan.rs`).

use crate::work::DestroyInstance;

use super::*;
use crate::model::FaultKind;
use crate::testing::{FakeCompute, created};

#[tokio::test]
async fn a_preempted_instance_of_a_vm_is_replaced_and_others_are_left_alone() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    let down = ctx.seed_vm("linux-0", created(ctx.now())).await;
    let up = ctx.seed_vm("linux-1", created(ctx.now())).await;
    for (name, status) in [
        (&down.hostname, "TERMINATED"),
        (&up.hostname, "RUNNING"),
        (&"linux-9-zzzz".to_owned(), "TERMINATED"),
    ] {
        let mut i = FakeCompute::instance(name, &[(crate::config::labels::DEPLOYMENT, "test")]);
        i.status = status.into();
        f.compute.instances.lock().unwrap().insert(name.clone(), i);
    }
    let t = InspectInstances { project: "test-project".into(), zone: "z".into() };
    run(&ctx, t.clone()).await.unwrap();
    assert_eq!(ctx.taken::<DestroyInstance>().await, [DestroyInstance::of(&down).unwrap()]);
    let got = ctx.ports.store.vm(&down.id).await.unwrap().unwrap().value;
    assert_eq!(got.fault.unwrap().kind, FaultKind::InstanceDown);
    assert!(ctx.ports.store.vm(&up.id).await.unwrap().unwrap().value.fault.is_none());
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap()[0].stage, "inspect_instances");
    // Seen again: recorded once, destroyed again (idempotent by its URL).
    run(&ctx, t).await.unwrap();
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap().len(), 1);
}
