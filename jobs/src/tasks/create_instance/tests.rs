//! Unit tests of `tasks/create_instance.rs`.

use crate::work::ManageBot;

use super::*;
use crate::config::labels;
use crate::model::Vm;
use crate::ports::compute::{ComputeError, Operation};
use crate::env::request_id;
use crate::providers::gce_insert::{follow, instance_spec};
use crate::testing::created as made;

fn op_error(code: &str, http: u16) -> Operation {
    Operation {
        name: "op-1".into(),
        done: true,
        error: Some(ComputeError::from_operation(code, Some(http), "m")),
    }
}

#[tokio::test]
async fn invalid_a_vm_that_is_gone_is_left_alone() {
    let (ctx, f) = Ctx::test();
    run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert!(f.compute.calls().is_empty());
}

#[tokio::test]
async fn a_vm_whose_record_names_an_unlisted_server_is_not_made() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", |v| v.swarming = "http://127.0.0.1:19999".into()).await;
    run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert!(f.compute.calls().is_empty(), "no instance is told of the server");
    let e = &ctx.ports.store.errors("linux").await.unwrap()[0];
    assert!(e.code == "untrusted" && e.message.contains("not listed"), "{e:?}");
}

#[tokio::test]
async fn already_done_a_created_vm_is_only_watched() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", made(ctx.now())).await;
    run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert!(f.compute.calls().is_empty());
    assert_eq!(ctx.taken::<ManageBot>().await, [ManageBot { id: "linux-0".into() }]);
}

#[tokio::test]
async fn done_records_the_instance_with_a_deterministic_request_id_and_watches_the_bot() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    let vm = ctx.seed_vm("linux-0", |_| {}).await;
    run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    let rid = request_id("create-linux-0-abcd");
    assert_eq!(f.compute.calls()[0], format!("insert linux-0-abcd {rid}"));
    let got = ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value;
    let placed = got.instance.expect("recorded");
    assert!(placed.url.ends_with("/linux-0-abcd") && placed.external_ip == "35.0.0.1");
    assert_eq!(got.hostname, vm.hostname);
    assert!(got.operation.is_empty(), "no operation left to follow");
    assert!(ctx.taken::<ManageBot>().await.is_empty(), "its bot cannot be there at once");
    assert_eq!(ctx.delayed::<ManageBot>().await, ["linux-0"], "looked for soon after boot");
    let m = ctx.metrics.text();
    for line in [
        r#"gce_backend_instance_operations_total{config="linux",zone="z",op="insert",result="ok",code=""} 1"#,
        r#"gce_backend_vm_lifecycle_seconds_count{config="linux",stage="change_to_insert"} 1"#,
        r#"gce_backend_vm_lifecycle_seconds_count{config="linux",stage="insert_to_created"} 1"#,
    ] {
        assert!(m.lines().any(|l| l == line), "{line} in\n{m}");
    }
}

#[tokio::test]
async fn a_pending_insert_is_followed_with_zone_operations_get_looking_twice_as_late_each_time() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", |_| {}).await;
    let pending = Operation { name: "op-7".into(), done: false, error: None };
    f.compute.inserts.lock().unwrap().push_back(Ok(pending.clone()));
    let ms = std::time::Duration::from_millis;
    let next = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert_eq!(next, Next::After(ms(250)), "the task goes back to its queue: no worker waits");
    assert_eq!(ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value.operation, "op-7");
    for (after, next) in [(1, 1000), (20, 5000)] {
        f.compute.operations.lock().unwrap().push_back(Ok(Some(pending.clone())));
        f.clock.advance(chrono::Duration::seconds(after));
        let got = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert_eq!(got, Next::After(ms(next)), "{after} s later: as long again, at most operation_poll");
    }
    // Compute forgot the operation: the same insert (same requestId) asks for it again.
    f.compute.operations.lock().unwrap().push_back(Ok(None));
    assert_eq!(run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap(), Next::Done);
    let insert = format!("insert linux-0-abcd {}", request_id("create-linux-0-abcd"));
    let op = "operation op-7".to_owned();
    let get = "get linux-0-abcd".to_owned();
    assert_eq!(f.compute.calls(), [insert.clone(), op.clone(), op.clone(), op, insert, get]);
    let vm = ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value;
    assert!(vm.instance.is_some() && vm.operation.is_empty());
}

#[tokio::test]
async fn already_exists_ours_is_adopted_and_foreign_drops_the_record() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", |_| {}).await;
    let ours = labelled("linux-0-abcd", "linux-0", "test");
    f.compute.instances.lock().unwrap().insert(ours.name.clone(), ours);
    f.compute.inserts.lock().unwrap().push_back(Err(ComputeError::from_http(
        Some(409),
        "alreadyExists",
        "exists",
    )));
    run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert!(ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value.instance.is_some(), "adopted");

    ctx.seed_vm("linux-1", |_| {}).await;
    let foreign = labelled("linux-1-abcd", "linux-1", "another-deployment");
    f.compute.instances.lock().unwrap().insert(foreign.name.clone(), foreign);
    f.compute.inserts.lock().unwrap().push_back(Err(ComputeError::from_http(
        Some(409),
        "alreadyExists",
        "exists",
    )));
    run(&ctx, CreateInstance { id: "linux-1".into() }).await.unwrap();
    assert!(ctx.ports.store.vm("linux-1").await.unwrap().is_none(), "not ours: a new hostname comes next");
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap()[0].code, "409");
}

#[tokio::test]
async fn quota_keeps_the_vm_backs_off_the_zone_and_uses_a_new_request_id_after() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", |_| {}).await;
    f.compute.inserts.lock().unwrap().push_back(Ok(op_error("QUOTA_EXCEEDED", 403)));
    let next = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert_eq!(
        next,
        Next::After(std::time::Duration::from_secs(30)),
        "tried again when the backoff ends"
    );
    let vm = ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value;
    assert_eq!((vm.hostname.as_str(), vm.insert_attempt, vm.url()), ("linux-0-abcd", 1, None));
    let b = ctx.ports.store.backoff("test-project", "z").await.unwrap().unwrap();
    assert_eq!((b.reason.as_str(), b.failures), ("QUOTA_EXCEEDED", 1));
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap()[0].code, "QUOTA_EXCEEDED");
    let quota = r#"gce_backend_instance_operations_total{config="linux",zone="z",op="insert",result="quota",code="QUOTA_EXCEEDED"} 1"#;
    assert!(ctx.metrics.text().lines().any(|l| l == quota), "{}", ctx.metrics.text());
    // Within the backoff: no call at all, and a look when it ends.
    let next = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert_eq!(next, Next::After(std::time::Duration::from_secs(30)));
    assert_eq!(f.compute.calls().len(), 1);
    // After it: a new attempt, so a new requestId.
    f.clock.advance(chrono::Duration::seconds(31));
    run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert_eq!(
        f.compute.calls()[1],
        format!("insert linux-0-abcd {}", request_id("create-linux-0-abcd-1"))
    );
    let once = r#"gce_backend_vm_lifecycle_seconds_count{config="linux",stage="change_to_insert"} 1"#;
    assert!(ctx.metrics.text().lines().any(|l| l == once), "a re-send is not another change");
    assert!(ctx.ports.store.backoff("test-project", "z").await.unwrap().is_none(), "success clears the backoff");
}

#[tokio::test]
async fn a_wave_of_stockouts_backs_the_zone_off_once() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    for id in ["linux-0", "linux-1", "linux-2"] {
        ctx.seed_vm(id, |_| {}).await;
        f.compute.inserts.lock().unwrap().push_back(Ok(op_error("ZONE_RESOURCE_POOL_EXHAUSTED", 503)));
    }
    run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    // The others were already sent when the zone backed off (insert_sent set elsewhere).
    for id in ["linux-1", "linux-2"] {
        let vm = ctx.ports.store.vm(id).await.unwrap().unwrap();
        let op = op_error("ZONE_RESOURCE_POOL_EXHAUSTED", 503);
        follow(&ctx, vm, op).await.unwrap();
    }
    let b = ctx.ports.store.backoff("test-project", "z").await.unwrap().unwrap();
    assert_eq!(
        (b.failures, b.reason.as_str()),
        (1, "ZONE_RESOURCE_POOL_EXHAUSTED"),
        "one wave, one step"
    );
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap().len(), 3, "each VM's error is recorded");
}

#[tokio::test]
async fn transient_errors_keep_the_vm_and_ask_for_a_retry() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", |_| {}).await;
    f.compute.inserts.lock().unwrap().push_back(Err(ComputeError::from_http(
        Some(503),
        "backendError",
        "busy",
    )));
    let e = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap_err();
    assert_eq!(e.class(), crate::Class::Transient);
    assert!(ctx.ports.store.vm("linux-0").await.unwrap().is_some());
}

#[tokio::test]
async fn permanent_errors_record_and_drop_the_vm_for_a_fresh_build() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", |_| {}).await;
    f.compute.inserts.lock().unwrap().push_back(Err(ComputeError::from_http(
        Some(400),
        "invalid",
        "bad image",
    )));
    run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert!(ctx.ports.store.vm("linux-0").await.unwrap().is_none());
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap()[0].message, "bad image");
    // The next VM of the Config waits for the Config's backoff instead of looping.
    ctx.seed_vm("linux-1", |_| {}).await;
    let next = run(&ctx, CreateInstance { id: "linux-1".into() }).await.unwrap();
    assert_eq!(f.compute.calls().len(), 1, "no second insert within the backoff");
    assert_eq!(next, Next::After(std::time::Duration::from_secs(30)), "it waits for the backoff's end");
    let st = crate::fleet::status::status(&*ctx.ports.store, "linux", ctx.now(), chrono::Duration::zero(), false)
        .await
        .unwrap();
    assert_eq!(st.backoff.unwrap().reason, "INVALID");
}

#[tokio::test]
async fn a_vm_past_the_amount_never_sent_to_gce_is_dropped_without_a_call() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    ctx.seed_vm("linux-2", |_| {}).await;
    run(&ctx, CreateInstance { id: "linux-2".into() }).await.unwrap();
    assert!(f.compute.calls().is_empty(), "the amount dropped since it was made");
    assert!(ctx.ports.store.vm("linux-2").await.unwrap().is_none());
}

#[tokio::test]
async fn a_drained_vm_never_sent_to_gce_is_dropped_without_a_call() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", |v| v.drained = true).await;
    run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert!(f.compute.calls().is_empty());
    assert!(ctx.ports.store.vm("linux-0").await.unwrap().is_none());
}

#[test]
fn the_instance_spec_carries_our_labels_and_the_swarming_server() {
    let (ctx, _) = Ctx::test();
    let vm = vm_fixture(&ctx);
    let spec = instance_spec(&vm, "prod");
    assert_eq!(spec.name, "linux-0-abcd");
    assert_eq!(spec.labels["gce-backend"], "prod");
    assert_eq!(spec.labels["gce-backend-vm"], "linux-0");
    assert_eq!(spec.attributes.machine_type, "zones/z/machineTypes/e2-small");
    assert!(spec.metadata.contains(&("swarming-server".into(), "https://swarm.example.com".into())));
}

fn vm_fixture(ctx: &Ctx) -> Vm {
    let c = crate::testing::config("linux", 1);
    let mut a = c.attributes;
    a.machine_type = a.machine_type.replace("{{.Zone}}", "z");
    Vm {
        id: "linux-0".into(),
        config: "linux".into(),
        index: 0,
        hostname: "linux-0-abcd".into(),
        attributes: a,
        swarming: c.swarming,
        lifetime: 1,
        timeout: 0,
        revision: String::new(),
        configured: ctx.now(),
        ..Vm::default()
    }
}

/// An instance labelled as VM `vm` of `deployment`.
fn labelled(name: &str, vm: &str, deployment: &str) -> crate::ports::compute::Instance {
    crate::testing::FakeCompute::instance(name, &[(labels::VM, vm), (labels::DEPLOYMENT, deployment)])
}

#[tokio::test]
async fn paused_a_vm_not_yet_sent_waits_and_one_already_sent_is_followed() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", |_| {}).await;
    ctx.seed_vm("linux-1", |v| v.insert_sent = Some(ctx.now())).await;
    crate::operate::pause(&ctx, "linux", "rollout", "bob").await.unwrap();
    let next = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert_eq!(next, Next::Done, "resuming pushes it again");
    assert!(f.compute.calls().is_empty(), "no insert while paused");
    let vm = ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value;
    assert!(vm.insert_sent.is_none() && !vm.drained, "kept as it was");
    run(&ctx, CreateInstance { id: "linux-1".into() }).await.unwrap();
    let rid = request_id("create-linux-1-abcd");
    assert_eq!(f.compute.calls()[0], format!("insert linux-1-abcd {rid}"), "the same insert, followed");
    assert!(ctx.ports.store.vm("linux-1").await.unwrap().unwrap().value.instance.is_some());
    // Past the amount, a VM not sent is still dropped while paused.
    ctx.seed_vm("linux-5", |_| {}).await;
    run(&ctx, CreateInstance { id: "linux-5".into() }).await.unwrap();
    assert!(ctx.ports.store.vm("linux-5").await.unwrap().is_none());
}

#[tokio::test]
async fn paused_after_a_refused_insert_no_insert_is_sent_again() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", |_| {}).await;
    let quota = ComputeError::from_http(Some(403), "quotaExceeded", "CPUS");
    f.compute.inserts.lock().unwrap().push_back(Err(quota));
    run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    let vm = ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value;
    assert!(vm.insert_sent.is_none(), "a refused send holds no operation");
    crate::operate::pause(&ctx, "linux", "quota incident", "bob").await.unwrap();
    assert_eq!(run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap(), Next::Done);
    assert_eq!(f.compute.calls().len(), 1, "only the refused insert: {:?}", f.compute.calls());
}
