//! Unit tests of `manage_bot`, shaped like its branches.

use crate::work::{CountVms, DestroyInstance, TerminateBot};
use chrono::Duration as D;

use super::*;
use crate::ports::bots::BotEvent;
use crate::testing::created;

fn bot(id: &str, first_seen: DateTime<Utc>) -> Bot {
    Bot { id: id.into(), first_seen: Some(first_seen), last_seen: Some(first_seen), ..Bot::default() }
}

async fn setup() -> (Ctx, crate::testing::Fakes, Vm) {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
    let inst = crate::testing::FakeCompute::instance(&vm.hostname, &[]);
    f.compute.instances.lock().unwrap().insert(vm.hostname.clone(), inst);
    (ctx, f, vm)
}

#[tokio::test]
async fn invalid_an_uncreated_or_missing_vm_is_left_alone() {
    let (ctx, f) = Ctx::test();
    run(&ctx, ManageBot { id: "linux-0".into() }).await.unwrap();
    ctx.seed_vm("linux-0", |_| {}).await;
    run(&ctx, ManageBot { id: "linux-0".into() }).await.unwrap();
    assert!(f.bots.calls().is_empty());
}

#[tokio::test]
async fn no_bot_yet_is_watched_soon_after_boot_then_backing_off_until_the_timeout() {
    let (ctx, f, vm) = setup().await;
    let next = run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(f.bots.calls(), ["get linux-0-abcd"]);
    assert!(ctx.taken::<DestroyInstance>().await.is_empty());
    let ms = std::time::Duration::from_millis;
    assert_eq!(next, Next::After(ms(500)), "just created: looked at again in half a second");
    f.clock.advance(D::seconds(6));
    let next = run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(next, Next::After(ms(3000)), "6 s after creation: half that");
    f.clock.advance(D::seconds(60));
    let next = run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(next, Next::After(ctx.watch()), "then at most `watch`");
    f.clock.advance(D::minutes(11));
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(ctx.taken::<DestroyInstance>().await, [DestroyInstance::of(&vm).unwrap()]);
}

#[tokio::test]
async fn a_connected_bot_is_recorded_once_and_left_running() {
    let (ctx, f, vm) = setup().await;
    f.bots
        .bots
        .lock()
        .unwrap()
        .insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now() + D::seconds(30)));
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    let got = ctx.ports.store.vm(&vm.id).await.unwrap().unwrap().value;
    assert_eq!(got.connected, Some(ctx.now() + D::seconds(30)));
    assert!(
        ctx.taken::<DestroyInstance>().await.is_empty() && ctx.taken::<TerminateBot>().await.is_empty()
    );
}

#[tokio::test]
async fn deleted_or_terminated_bots_get_their_instance_destroyed() {
    let (ctx, f, vm) = setup().await;
    let mut gone = bot(&vm.hostname, ctx.now());
    gone.deleted = true;
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), gone);
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1, "deleted");

    let (ctx, f, vm) = setup().await;
    let mut b = bot(&vm.hostname, ctx.now());
    b.is_dead = true;
    b.termination_task_id = "t1".into();
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), b);
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1);
}

#[tokio::test]
async fn past_the_deadline_the_bot_is_terminated_then_destroyed_on_bot_terminate() {
    let (ctx, f, vm) = setup().await;
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
    f.clock.advance(D::days(2));
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(
        ctx.taken::<TerminateBot>().await,
        [TerminateBot { id: vm.id.clone(), hostname: vm.hostname.clone() }]
    );
    crate::records::writes::update_vm(&ctx, &vm.id, |v| {
        v.terminate_sent = Some(ctx.now());
        true
    })
    .await
    .unwrap();
    let event = BotEvent { ts: ctx.now(), event_type: "bot_terminate".into() };
    f.bots.events.lock().unwrap().insert(vm.hostname.clone(), vec![event]);
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1);
}

#[tokio::test]
async fn a_lost_termination_is_sent_again_while_waiting_for_bot_terminate() {
    let (ctx, f, vm) = setup().await;
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
    crate::records::writes::update_vm(&ctx, &vm.id, |v| {
        v.terminate_sent = Some(ctx.now());
        true
    })
    .await
    .unwrap();
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(
        ctx.taken::<TerminateBot>().await.len(),
        1,
        "terminate_bot decides whether to send it again"
    );
    assert!(ctx.taken::<DestroyInstance>().await.is_empty());
}

#[tokio::test]
async fn a_dead_bot_of_a_drained_vm_is_destroyed_even_without_a_timeout() {
    let (ctx, f) = Ctx::test();
    let vm = ctx
        .seed_vm("linux-0", |v| {
            created(ctx.now())(v);
            v.drained = true;
            v.timeout = 3600; // not dead long enough for the timeout: only retiring applies
        })
        .await;
    let mut dead = bot(&vm.hostname, ctx.now());
    dead.is_dead = true;
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead);
    f.clock.advance(D::seconds(5));
    run(&ctx, ManageBot { id: vm.id }).await.unwrap();
    assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1, "it cannot run a termination task");
}

#[tokio::test]
async fn a_bot_from_an_earlier_incarnation_is_ignored() {
    let (ctx, f, vm) = setup().await;
    let mut old = bot(&vm.hostname, ctx.now() - D::days(3));
    old.deleted = true;
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), old);
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert!(
        ctx.taken::<DestroyInstance>().await.is_empty(),
        "its deletion says nothing of this instance"
    );
}

#[tokio::test]
async fn transient_swarming_errors_are_retried_and_change_nothing() {
    let (ctx, f, vm) = setup().await;
    *f.bots.fail.lock().unwrap() = Some(crate::ports::bots::BotError::grpc(14, "down"));
    let e = run(&ctx, ManageBot { id: vm.id }).await.unwrap_err();
    assert_eq!(e.class(), crate::Class::Transient);
    assert!(ctx.taken::<DestroyInstance>().await.is_empty());
}

#[tokio::test]
async fn a_vm_past_its_configs_amount_is_only_read_as_drained_here() {
    let (ctx, f, vm) = setup().await;
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
    let cfg = ctx.ports.store.config("linux").await.unwrap().unwrap();
    let mut rec = cfg.value;
    rec.current_amount = 0;
    ctx.ports.store.put_config(&rec, crate::ports::store::Expect::Version(cfg.version)).await.unwrap();
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert!(ctx.taken::<crate::work::DrainVm>().await.is_empty(), "no manage_bot → drain_vm bounce");
    assert!(ctx.taken::<TerminateBot>().await.is_empty(), "not drained yet: left running");
    crate::records::writes::update_vm(&ctx, &vm.id, |v| {
        v.drained = true;
        true
    })
    .await
    .unwrap();
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(ctx.taken::<TerminateBot>().await.len(), 1, "drained: its bot is terminated");
}

fn dead(vm: &Vm, now: DateTime<Utc>) -> Bot {
    let mut b = bot(&vm.hostname, now);
    b.is_dead = true;
    b
}

#[tokio::test]
async fn a_dead_bot_on_a_stopped_or_gone_instance_is_replaced_without_waiting_for_the_timeout() {
    for status in [Some("TERMINATED"), Some("STOPPED"), None] {
        let (ctx, f, vm) = setup().await;
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead(&vm, ctx.now()));
        f.compute.instances.lock().unwrap().clear();
        if let Some(s) = status {
            let mut i = crate::testing::FakeCompute::instance(&vm.hostname, &[]);
            i.status = s.into();
            f.compute.instances.lock().unwrap().insert(vm.hostname.clone(), i);
        }
        f.clock.advance(D::seconds(5)); // far from the 10-minute timeout
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1, "{status:?}");
        let got = ctx.ports.store.vm(&vm.id).await.unwrap().unwrap().value;
        assert_eq!(got.fault.map(|f| f.kind), Some(FaultKind::InstanceDown), "{status:?}");
        assert_eq!(ctx.ports.store.errors("linux").await.unwrap()[0].code, "instance_down");
        assert_eq!(ctx.taken::<CountVms>().await.len(), 1, "status follows at once");
        let counts = crate::records::counts::tally(&*ctx.ports.store, "linux", ctx.now()).await.unwrap().0;
        assert_eq!((counts.connected, counts.unhealthy), (0, 1), "{status:?}");
    }
}

#[tokio::test]
async fn a_dead_bot_on_a_running_instance_counts_as_dead_until_it_comes_back() {
    let (ctx, f, vm) = setup().await;
    let i = crate::testing::FakeCompute::instance(&vm.hostname, &[]);
    f.compute.instances.lock().unwrap().insert(vm.hostname.clone(), i);
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead(&vm, ctx.now()));
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert!(ctx.taken::<DestroyInstance>().await.is_empty(), "the timeout has not passed");
    let counts = crate::records::counts::tally(&*ctx.ports.store, "linux", ctx.now()).await.unwrap().0;
    assert_eq!((counts.connected, counts.dead), (0, 1));
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
    f.clock.advance(D::seconds(100)); // past observation_ttl: asked again
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert!(ctx.ports.store.vm(&vm.id).await.unwrap().unwrap().value.fault.is_none());
}

#[tokio::test]
async fn a_bot_that_never_connects_is_recorded_as_such() {
    let (ctx, f, vm) = setup().await;
    f.clock.advance(D::minutes(11));
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    let got = ctx.ports.store.vm(&vm.id).await.unwrap().unwrap().value;
    assert_eq!(got.fault.map(|f| f.kind), Some(FaultKind::NeverConnected));
    let e = &ctx.ports.store.errors("linux").await.unwrap()[0];
    assert_eq!((e.code.as_str(), e.vm.as_deref()), ("never_connected", Some(vm.id.as_str())), "names its VM");
}

#[tokio::test]
async fn paused_a_healthy_vm_past_its_deadline_is_kept_until_resumed() {
    let (ctx, f, vm) = setup().await;
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
    crate::operate::pause(&ctx, "linux", "rollout", "bob").await.unwrap();
    f.clock.advance(D::days(2));
    assert_eq!(run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap(), Next::Done);
    assert!(
        ctx.taken::<TerminateBot>().await.is_empty() && ctx.taken::<DestroyInstance>().await.is_empty()
    );
    crate::operate::resume(&ctx, "linux", "bob").await.unwrap();
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(ctx.taken::<TerminateBot>().await.len(), 1, "retired once resumed");
}

#[tokio::test]
async fn paused_a_faulty_vm_is_destroyed_and_not_replaced() {
    let (ctx, f, vm) = setup().await;
    crate::operate::pause_all(&ctx, "incident", "bob").await.unwrap();
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead(&vm, ctx.now()));
    f.compute.instances.lock().unwrap().clear(); // the instance is gone
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    let destroy = ctx.taken::<DestroyInstance>().await;
    assert_eq!(destroy.len(), 1, "cleaned up while paused");
    crate::tasks::destroy_instance::run(&ctx, destroy[0].clone()).await.unwrap();
    for t in ctx.taken::<crate::work::DeleteBot>().await {
        crate::tasks::delete_bot::run(&ctx, t).await.unwrap();
    }
    assert!(ctx.ports.store.vm(&vm.id).await.unwrap().is_none(), "deleted");
    for t in ctx.taken::<crate::work::ExpandConfig>().await {
        crate::tasks::expand_config::run(&ctx, t).await.unwrap();
    }
    assert!(ctx.taken::<crate::work::CreateInstance>().await.is_empty(), "no new incarnation while paused");
    assert!(ctx.ports.store.vm(&vm.id).await.unwrap().is_none(), "nor its record");
}

#[tokio::test]
async fn paused_past_its_deadline_a_dead_bot_is_a_fault_that_waits_for_the_timeout() {
    let (ctx, f, vm) = setup().await;
    crate::operate::pause(&ctx, "linux", "rollout", "bob").await.unwrap();
    f.clock.advance(D::days(2));
    // Dead just now: with the deadline passed it would go at once, but not while paused.
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead(&vm, ctx.now()));
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert!(ctx.taken::<DestroyInstance>().await.is_empty(), "the timeout applies as to any VM");
    let got = ctx.ports.store.vm(&vm.id).await.unwrap().unwrap().value;
    assert_eq!(got.fault.map(|f| f.kind), Some(FaultKind::BotDead), "and it shows");
}

#[tokio::test]
async fn a_vm_just_woken_gives_its_bot_dead_since_it_slept_time_to_come_back() {
    let (ctx, f, vm) = setup().await;
    // Connected, then suspended for an hour (its bot dead since), woken now; timeout 0 would
    // otherwise destroy a dead bot's instance at once.
    let slept = ctx.now();
    f.clock.advance(D::hours(1));
    crate::records::writes::update_vm(&ctx, &vm.id, |v| {
        v.connected = Some(slept);
        v.timeout = 0;
        v.woken = Some(slept + D::hours(1));
        true
    })
    .await
    .unwrap();
    let dead = Bot { is_dead: true, ..bot(&vm.hostname, slept) };
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead);
    let next = run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert!(matches!(next, Next::After(d) if d <= ctx.watch()), "looked at again soon: {next:?}");
    assert!(ctx.taken::<DestroyInstance>().await.is_empty(), "not destroyed while it wakes");
    // Still dead once bot_grace has passed: it is not coming back.
    f.clock.advance(ctx.settings.timing.bot_grace.chrono() + D::seconds(1));
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1);
}

#[tokio::test]
async fn a_parked_vm_past_its_lifetime_goes_at_once_and_one_waking_is_left_to_park_vm() {
    let (ctx, f, vm) = setup().await;
    let parked = crate::model::parked::Parked { unknown: Default::default(),
        how: crate::model::parked::Park::Suspend,
        since: ctx.now(),
        done: true,
        waking: None,
        operation: String::new(),
        turns: 1,
    };
    crate::records::writes::update_vm(&ctx, &vm.id, |v| {
        v.parked = Some(parked.clone());
        true
    })
    .await
    .unwrap();
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert!(ctx.taken::<DestroyInstance>().await.is_empty() && f.bots.calls().is_empty(), "warm: left alone");
    f.clock.advance(D::days(2));
    crate::records::writes::update_vm(&ctx, &vm.id, |v| {
        v.parked.as_mut().unwrap().waking = Some(v.configured);
        true
    })
    .await
    .unwrap();
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert!(ctx.taken::<DestroyInstance>().await.is_empty(), "waking: park_vm finishes first");
    crate::records::writes::update_vm(&ctx, &vm.id, |v| {
        v.parked.as_mut().unwrap().waking = None;
        true
    })
    .await
    .unwrap();
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1, "past its lifetime: gone");
}

#[tokio::test]
async fn a_vm_woken_from_the_warm_pool_waits_for_its_bot_like_a_booting_one() {
    use crate::model::release::Standing;
    let (ctx, f, vm) = setup().await;
    let created = vm.instance.as_ref().unwrap().created;
    // Connected, parked an hour later, woken two hours after that: Swarming called its silent
    // bot dead long ago (longer than the VM's timeout).
    f.clock.advance(D::hours(3));
    let now = ctx.now();
    let mut b = bot(&vm.hostname, created);
    b.last_seen = Some(created + D::hours(1));
    b.is_dead = true;
    f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), b.clone());
    update_vm(&ctx, &vm.id, |v| {
        v.connected = Some(created);
        v.woken = Some(now);
        true
    })
    .await
    .unwrap();
    let next = run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert!(ctx.taken::<DestroyInstance>().await.is_empty(), "a woken VM is not destroyed for its old death");
    let got = ctx.ports.store.vm(&vm.id).await.unwrap().unwrap().value;
    assert!(got.fault.is_none(), "no fault: {:?}", got.fault);
    assert!(matches!(next, Next::After(d) if d <= ctx.watch()), "looked at again soon");
    let seen = Observed { unknown: Default::default(), bot: b.clone(), at: now, idle_since: None };
    assert_eq!(Standing::of(&got, Some(&seen)), Standing::Booting, "not let go first as a dead one");
    // A bot that died after the wake is dead.
    let mut later = b.clone();
    later.last_seen = Some(now + D::seconds(1));
    assert_eq!(Standing::of(&got, Some(&Observed { bot: later, ..seen })), Standing::Down);
    // Not back within the timeout (or bot_grace) from the wake: dead after all, and replaced.
    let wait = D::seconds(vm.timeout as i64).max(ctx.settings.timing.bot_grace.chrono());
    f.clock.advance(wait + D::seconds(1));
    run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
    assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1);
}
