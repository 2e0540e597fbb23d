//! Unit tests of `tasks/park_vm.rs`: kept warm, woken, never while busy, gone when it may not wait.

use super::*;
use crate::config::Warm;
use crate::model::Bot;
use crate::testing::created;
use crate::work::ParkVm;

/// Config `linux` (bounds 0..=4, warm: one suspended, one stopped) with VMs 0..3 connected; its
/// record wants `wanted` and keeps `warm` warm.
async fn warm_pool(ctx: &Ctx, fakes: &crate::testing::Fakes, wanted: u32, warm: &[u32]) {
    ctx.seed_config_with("linux", wanted, |c| {
        c.amount.min = 0;
        c.amount.max = 4;
        c.warm = Some(Warm { unknown: Default::default(), suspended: 1, stopped: 1 });
    })
    .await;
    let now = ctx.now();
    for i in 0..4 {
        ctx.seed_vm(&format!("linux-{i}"), |v| {
            created(now)(v);
            v.connected = Some(now);
        })
        .await;
        let name = format!("linux-{i}-abcd");
        let inst = crate::testing::FakeCompute::instance(&name, &[]);
        fakes.compute.instances.lock().unwrap().insert(name, inst);
    }
    let warm: std::collections::BTreeSet<u32> = warm.iter().copied().collect();
    crate::records::writes::update_config::<TaskError>(ctx, "linux", |r| {
        r.warm = warm.clone();
        Ok(true)
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_vm_kept_warm_is_suspended_then_the_next_stopped_and_woken_when_wanted() {
    let (ctx, fakes) = Ctx::test();
    warm_pool(&ctx, &fakes, 2, &[2, 3]).await;
    assert_eq!(run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap(), Next::Done);
    assert_eq!(run(&ctx, ParkVm { id: "linux-3".into() }).await.unwrap(), Next::Done);
    let calls: Vec<String> = fakes.compute.calls().into_iter().filter(|c| !c.starts_with("get")).collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[0].starts_with("suspend linux-2-abcd ") && calls[1].starts_with("stop linux-3-abcd "), "{calls:?}");
    let p = ctx.ports.store.vm("linux-2").await.unwrap().unwrap().value.parked.unwrap();
    assert!(p.done && p.how == Park::Suspend, "{p:?}");
    // Run again: nothing more is sent (idempotent).
    run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap();
    assert_eq!(fakes.compute.calls().iter().filter(|c| c.starts_with("suspend")).count(), 1);
    // Wanted again: resumed, taken off `waking`, its bot looked at.
    crate::records::writes::update_config::<TaskError>(&ctx, "linux", |r| {
        r.current_amount = 3;
        r.warm.remove(&2);
        r.waking.insert(2);
        Ok(true)
    })
    .await
    .unwrap();
    assert_eq!(run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap(), Next::Done);
    assert!(fakes.compute.calls().iter().any(|c| c.starts_with("resume linux-2-abcd ")));
    assert_eq!(ctx.ports.store.vm("linux-2").await.unwrap().unwrap().value.parked, None);
    assert!(ctx.ports.store.config("linux").await.unwrap().unwrap().value.waking.is_empty());
    assert_eq!(ctx.taken::<ManageBot>().await, [ManageBot { id: "linux-2".into() }]);
    // Let go again later: a new suspend, not a replay of the first one's requestId.
    fakes.clock.advance(chrono::Duration::seconds(30));
    crate::records::writes::update_config::<TaskError>(&ctx, "linux", |r| {
        r.current_amount = 2;
        r.warm.insert(2);
        Ok(true)
    })
    .await
    .unwrap();
    assert_eq!(run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap(), Next::Done);
    let suspends: Vec<String> = fakes.compute.calls().into_iter().filter(|c| c.starts_with("suspend linux-2")).collect();
    assert_eq!(suspends.len(), 2, "{suspends:?}");
    assert_ne!(suspends[0], suspends[1], "each park has its own requestId");
}

#[tokio::test]
async fn a_busy_bot_is_not_parked_and_one_not_kept_warm_goes_to_drain() {
    let (ctx, fakes) = Ctx::test();
    warm_pool(&ctx, &fakes, 2, &[2]).await;
    let busy = Bot { id: "linux-2-abcd".into(), task_id: "t1".into(), ..Bot::default() };
    fakes.bots.bots.lock().unwrap().insert(busy.id.clone(), busy);
    assert_eq!(run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap(), Next::After(ctx.watch()));
    assert!(!fakes.compute.calls().iter().any(|c| c.starts_with("suspend")), "not while it runs a task");
    assert_eq!(ctx.ports.store.vm("linux-2").await.unwrap().unwrap().value.parked, None);
    // linux-3 is neither wanted nor kept warm: drained, not parked.
    run(&ctx, ParkVm { id: "linux-3".into() }).await.unwrap();
    assert_eq!(ctx.taken::<DrainVm>().await, [DrainVm { id: "linux-3".into() }]);
    // Past its lifetime a warm VM is not kept: it goes.
    fakes.clock.advance(chrono::TimeDelta::days(2));
    fakes.bots.bots.lock().unwrap().clear();
    run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap();
    assert_eq!(ctx.taken::<DrainVm>().await, [DrainVm { id: "linux-2".into() }]);
}

#[tokio::test]
async fn each_park_and_wake_is_a_request_of_its_own_and_a_retry_asks_swarming_again() {
    let (ctx, fakes) = Ctx::test();
    warm_pool(&ctx, &fakes, 2, &[2]).await;
    // The first suspend is refused; meanwhile the bot takes a task: no second suspend.
    let refused = crate::ports::compute::ComputeError::from_http(Some(503), "backendError", "try later");
    fakes.compute.powers.lock().unwrap().push_back(Err(refused));
    assert!(run(&ctx, ParkVm { id: "linux-2".into() }).await.is_err());
    let busy = Bot { id: "linux-2-abcd".into(), task_id: "t1".into(), ..Bot::default() };
    fakes.bots.bots.lock().unwrap().insert(busy.id.clone(), busy);
    assert_eq!(run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap(), Next::After(ctx.watch()));
    assert_eq!(fakes.compute.calls().iter().filter(|c| c.starts_with("suspend")).count(), 1);
    // Idle again: suspended with a new request; woken; parked again: three more, all different.
    fakes.bots.bots.lock().unwrap().clear();
    run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap();
    want(&ctx, 3).await;
    run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap();
    assert!(ctx.ports.store.vm("linux-2").await.unwrap().unwrap().value.woken.is_some());
    want(&ctx, 2).await;
    run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap();
    let ids: Vec<String> = fakes
        .compute
        .calls()
        .into_iter()
        .filter(|c| ["suspend ", "resume "].iter().any(|v| c.starts_with(v)))
        .map(|c| c.rsplit(' ').next().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 4, "{ids:?}");
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), 4, "no request id twice: {ids:?}");
    assert!(ctx.ports.store.vm("linux-2").await.unwrap().unwrap().value.parked.is_some_and(|p| p.done));
}

/// Config `linux` now wants `n` VMs (3: index 2 too; 2: index 2 kept warm again).
async fn want(ctx: &Ctx, n: u32) {
    crate::records::writes::update_config::<TaskError>(ctx, "linux", |r| {
        r.current_amount = n;
        r.warm = if n == 3 { Default::default() } else { [2].into() };
        Ok(true)
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_vm_made_for_the_warm_pool_is_parked_only_once_its_bot_has_connected() {
    let (ctx, fakes) = Ctx::test();
    warm_pool(&ctx, &fakes, 2, &[2]).await;
    // No instance yet, then an instance whose bot has not connected: looked at again later.
    crate::records::writes::update_vm(&ctx, "linux-2", |v| {
        v.instance = None;
        v.connected = None;
        true
    })
    .await
    .unwrap();
    assert_eq!(run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap(), Next::After(ctx.watch()));
    crate::records::writes::update_vm(&ctx, "linux-2", |v| {
        created(v.configured)(v);
        true
    })
    .await
    .unwrap();
    assert_eq!(run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap(), Next::After(ctx.watch()));
    assert!(!fakes.compute.calls().iter().any(|c| c.starts_with("suspend")), "not before its bot is up");
    // Its bot connected: suspended.
    let now = ctx.now();
    crate::records::writes::update_vm(&ctx, "linux-2", |v| {
        v.connected = Some(now);
        true
    })
    .await
    .unwrap();
    assert_eq!(run(&ctx, ParkVm { id: "linux-2".into() }).await.unwrap(), Next::Done);
    assert!(fakes.compute.calls().iter().any(|c| c.starts_with("suspend linux-2-abcd ")));
}
