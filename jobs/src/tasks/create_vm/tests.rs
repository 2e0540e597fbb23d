//! Unit tests of `tasks/create_vm.rs`.

use crate::work::CreateInstance;

use super::*;

#[tokio::test]
async fn creates_a_vm_with_a_fresh_hostname_and_the_zone_filled_in_then_starts_its_instance() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    run(&ctx, CreateVm { id: "linux-1".into() }).await.unwrap();
    let vm = ctx.ports.store.vm("linux-1").await.unwrap().unwrap().value;
    assert!(vm.hostname.starts_with("linux-1-") && vm.hostname.len() == "linux-1-".len() + 4);
    assert_eq!(vm.attributes.machine_type, "zones/z/machineTypes/e2-small");
    assert!(vm.lifetime >= 86_400 && vm.lifetime < 86_400 + 8_640, "lifetime plus up to 10 %");
    assert_eq!(ctx.taken::<CreateInstance>().await, [CreateInstance { id: "linux-1".into() }]);
    // Already there: left as it is.
    run(&ctx, CreateVm { id: "linux-1".into() }).await.unwrap();
    assert_eq!(ctx.ports.store.vm("linux-1").await.unwrap().unwrap().value.hostname, vm.hostname);
}

#[tokio::test]
async fn ids_past_the_amount_or_malformed_are_not_created() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    run(&ctx, CreateVm { id: "linux-5".into() }).await.unwrap();
    assert!(ctx.ports.store.vm("linux-5").await.unwrap().is_none());
    let e = run(&ctx, CreateVm { id: "garbage".into() }).await.unwrap_err();
    assert_eq!(e.class(), crate::Class::Permanent);
}

#[tokio::test]
async fn a_paused_config_gets_no_new_vm_record() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    crate::operate::pause_all(&ctx, "incident", "bob").await.unwrap();
    run(&ctx, CreateVm { id: "linux-1".into() }).await.unwrap();
    assert!(ctx.ports.store.vm("linux-1").await.unwrap().is_none());
    assert!(ctx.taken::<CreateInstance>().await.is_empty());
}
