//! Unit tests of `tasks/terminate_bot.rs`.

use super::*;
use crate::testing::created;

#[tokio::test]
async fn terminates_once_per_period_and_ignores_other_incarnations() {
    let (ctx, f) = Ctx::test();
    let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
    run(&ctx, TerminateBot { id: vm.id.clone(), hostname: "linux-0-zzzz".into() }).await.unwrap();
    assert!(f.bots.calls().is_empty());
    run(&ctx, TerminateBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await.unwrap();
    run(&ctx, TerminateBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await.unwrap();
    assert_eq!(f.bots.calls(), ["terminate linux-0-abcd"], "not sent again within the hour");
    assert!(ctx.ports.store.vm(&vm.id).await.unwrap().unwrap().value.terminate_sent.is_some());
    f.clock.advance(chrono::Duration::hours(2));
    run(&ctx, TerminateBot { id: vm.id, hostname: vm.hostname }).await.unwrap();
    assert_eq!(f.bots.calls().len(), 2);
}
