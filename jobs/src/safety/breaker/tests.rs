//! Unit tests of `breaker.rs`.

use super::*;
use crate::ctx::Ctx;
use crate::model::breaker_state::BreakerState;
use crate::testing::created;
use crate::work::{CreateVm, ExpandConfig};

async fn setup(after: u32) -> (Ctx, crate::testing::Fakes) {
    let (ctx, f) = Ctx::test();
    ctx.seed_config_with("linux", 3, |c| c.breaker.after = after).await;
    (ctx, f)
}

async fn state(ctx: &Ctx) -> BreakerState {
    ctx.ports.store.config("linux").await.unwrap().unwrap().value.breaker
}

async fn expand(ctx: &Ctx) -> Next {
    crate::tasks::expand_config::run(ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap()
}

#[tokio::test]
async fn failures_in_a_row_open_it_then_one_canary_at_a_time_and_a_connected_canary_closes_it() {
    let (ctx, f) = setup(2).await;
    let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
    failed(&ctx, &vm, FaultKind::NeverConnected).await.unwrap();
    assert_eq!(state(&ctx).await.failed_in_a_row, 1);
    assert!(state(&ctx).await.open.is_none());
    failed(&ctx, &vm, FaultKind::NeverConnected).await.unwrap();
    let open = state(&ctx).await.open.expect("open after 2");
    assert!(open.reason.contains("2 VMs in a row failed"), "{}", open.reason);
    let st =
        crate::fleet::status::status(&*ctx.ports.store, "linux", ctx.now(), chrono::Duration::zero(), true)
            .await
            .unwrap();
    assert!(st.breaker.is_some() && st.errors.iter().any(|e| e.stage == BY), "on the status");
    // Open: nothing is made, and the first canary waits for canary_after.
    assert_eq!(expand(&ctx).await, Next::After(Duration::from_secs(60)));
    assert!(ctx.taken::<CreateVm>().await.is_empty());
    f.clock.advance(chrono::Duration::seconds(61));
    expand(&ctx).await;
    assert_eq!(ctx.finished::<CreateVm>().await, [CreateVm { id: "linux-1".into() }], "one canary");
    expand(&ctx).await;
    assert_eq!(ctx.taken::<CreateVm>().await, [CreateVm { id: "linux-1".into() }], "the same, again");
    crate::tasks::create_vm::run(&ctx, CreateVm { id: "linux-1".into() }).await.unwrap();
    let canary = ctx.ports.store.vm("linux-1").await.unwrap().unwrap().value;
    assert!(canary.canary, "made, as the canary");
    crate::tasks::create_vm::run(&ctx, CreateVm { id: "linux-2".into() }).await.unwrap();
    assert!(ctx.ports.store.vm("linux-2").await.unwrap().is_none(), "no other VM while open");
    // The canary fails: the next waits twice as long.
    failed(&ctx, &canary, FaultKind::NeverConnected).await.unwrap();
    let open = state(&ctx).await.open.unwrap();
    assert_eq!(
        (open.canaries, open.canary, open.next_canary),
        (1, None, ctx.now() + chrono::Duration::seconds(120))
    );
    // A canary connects: closed, and the Config converges again.
    let mut next = canary.clone();
    next.connected = Some(ctx.now());
    ctx.taken::<ExpandConfig>().await;
    connected(&ctx, &next).await.unwrap();
    assert_eq!(state(&ctx).await, BreakerState::default());
    assert_eq!(ctx.taken::<ExpandConfig>().await.len(), 1, "woken");
}

#[tokio::test]
async fn a_preemption_or_a_late_death_is_no_failure_and_a_proven_vm_ends_the_streak() {
    let (ctx, f) = setup(5).await;
    let mut vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
    vm.connected = Some(ctx.now());
    vm.attributes.provisioning_model = "SPOT".into();
    failed(&ctx, &vm, FaultKind::InstanceDown).await.unwrap();
    assert_eq!(state(&ctx).await.failed_in_a_row, 0, "preempted");
    failed(&ctx, &vm, FaultKind::BotDead).await.unwrap();
    assert_eq!(state(&ctx).await.failed_in_a_row, 1, "dead a moment after connecting");
    f.clock.advance(chrono::Duration::minutes(11));
    failed(&ctx, &vm, FaultKind::BotDead).await.unwrap();
    assert_eq!(state(&ctx).await.failed_in_a_row, 1, "dead after 11 minutes: not counted");
    // Three more: the fifth would open it, but a bot that connected since the streak began
    // has lived 10 minutes: a new streak instead.
    for _ in 0..3 {
        failed(&ctx, &vm, FaultKind::NeverConnected).await.unwrap();
    }
    assert_eq!(state(&ctx).await.failed_in_a_row, 4);
    ctx.seed_vm("linux-1", |v| {
        created(ctx.now())(v);
        v.connected = Some(ctx.now() - chrono::Duration::minutes(1));
    })
    .await;
    f.clock.advance(chrono::Duration::minutes(10));
    failed(&ctx, &vm, FaultKind::NeverConnected).await.unwrap();
    let s = state(&ctx).await;
    assert_eq!((s.failed_in_a_row, s.open.is_none()), (1, true), "{s:?}");
    // after = 0: never opens.
    let (ctx, _) = setup(0).await;
    for _ in 0..10 {
        failed(&ctx, &vm, FaultKind::NeverConnected).await.unwrap();
    }
    assert_eq!(state(&ctx).await, BreakerState::default());
}
