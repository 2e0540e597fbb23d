//! Unit tests of `tasks/delete_bot.rs`.

use crate::work::ExpandConfig;

use super::*;
use crate::testing::created;

#[tokio::test]
async fn a_hostname_of_another_incarnation_does_nothing() {
    let (ctx, f) = Ctx::test();
    let vm = ctx.seed_vm("linux-0", removing(ctx.now())).await;
    run(&ctx, DeleteBot { id: "linux-0".into(), hostname: "linux-0-zzzz".into() }).await.unwrap();
    // The same hostname on an incarnation whose machine is not being removed (a static
    // machine's next incarnation): left alone too.
    crate::records::writes::update_vm(&ctx, &vm.id, |v| {
        v.destroying = None;
        true
    })
    .await
    .unwrap();
    run(&ctx, DeleteBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await.unwrap();
    assert!(f.bots.calls().is_empty());
    assert!(ctx.ports.store.vm("linux-0").await.unwrap().is_some());
}

fn removing(now: chrono::DateTime<chrono::Utc>) -> impl FnOnce(&mut crate::model::Vm) {
    move |v| {
        created(now)(v);
        v.destroying = Some(now);
    }
}

#[tokio::test]
async fn deletes_the_bot_then_the_record_and_asks_for_a_replacement() {
    let (ctx, f) = Ctx::test();
    let vm = ctx.seed_vm("linux-0", removing(ctx.now())).await;
    // The fake has no such bot (as after NOT_FOUND): the record goes all the same.
    run(&ctx, DeleteBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await.unwrap();
    assert_eq!(f.bots.calls(), ["delete linux-0-abcd"]);
    assert!(ctx.ports.store.vm("linux-0").await.unwrap().is_none());
    assert_eq!(ctx.taken::<ExpandConfig>().await, [ExpandConfig { prefix: "linux".into() }]);
    assert!(ctx.ports.store.vms_by_hostname(&[vm.hostname]).await.unwrap()[0].is_none(), "indexes follow");
}
