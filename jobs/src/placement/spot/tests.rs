//! Unit tests of `spot.rs`: preemptions and refusals counted through the paths that find them,
//! the failover they start, the VMs made meanwhile, its end, and how status and a rolling update
//! see it.

use chrono::Duration;

use super::*;
use crate::config::{Config, Secs, SpotFailover};
use crate::ctx::Ctx;
use crate::ports::compute::{ComputeError, Operation};
use crate::testing::{Fakes, created};
use crate::work::{CreateInstance, CreateVm};
use crate::{model::spot_state::Failover, model::spot_state::SpotState};

/// A Spot Config `spot` of `amount` VMs failing over after more than `more_than` events.
fn spot_config(amount: u32, more_than: u32) -> Config {
    let mut c = crate::testing::config("spot", amount);
    c.attributes.provisioning_model = "SPOT".into();
    c.attributes.instance_termination_action = "STOP".into();
    c.spot_failover = Some(SpotFailover {
        unknown: Default::default(),
        more_than,
        within: Secs(600),
        cooldown: Secs(1800),
    });
    c.validate().expect("valid");
    c
}

async fn setup(amount: u32, more_than: u32) -> (Ctx, Fakes) {
    let (ctx, f) = Ctx::test();
    crate::operate::apply(&ctx, spot_config(amount, more_than), "t").await.unwrap();
    (ctx, f)
}

async fn state(ctx: &Ctx) -> SpotState {
    ctx.ports.store.config("spot").await.unwrap().unwrap().value.spot
}

/// A Spot VM of the Config with an instance (its attributes the Config's now).
async fn spot_vm(ctx: &Ctx, id: &str, made: bool) -> Vm {
    let c = ctx.ports.store.config("spot").await.unwrap().unwrap().value.config;
    ctx.seed_vm(id, |v| {
        if made {
            created(ctx.now())(v);
        }
        v.attributes = c.attributes_in("z");
    })
    .await
}

async fn vm(ctx: &Ctx, id: &str) -> Option<Vm> {
    ctx.ports.store.vm(id).await.unwrap().map(|v| v.value)
}

#[tokio::test]
async fn preemptions_fail_the_pool_over_once_each_and_its_new_vms_are_standard() {
    let (ctx, _) = setup(3, 1).await;
    let a = spot_vm(&ctx, "spot-0", true).await;
    let b = spot_vm(&ctx, "spot-1", true).await;
    crate::fleet::lifecycle::replace_down(&ctx, &a, Some("TERMINATED"), "manage_bot").await.unwrap();
    // Found again (inspect_instances after manage_bot, a task run twice): the same preemption.
    let a_now = vm(&ctx, "spot-0").await.unwrap();
    crate::fleet::lifecycle::replace_down(&ctx, &a_now, Some("TERMINATED"), "inspect_instances")
        .await
        .unwrap();
    let s = state(&ctx).await;
    assert_eq!((s.preempted, s.failover.is_none()), (1, true), "one preemption, counted once");
    // Gone (instance_termination_action DELETE, or deleted): a preemption too.
    crate::fleet::lifecycle::replace_down(&ctx, &b, None, "manage_bot").await.unwrap();
    let s = state(&ctx).await;
    let f = s.failover.clone().expect("more than 1 preemption: failed over");
    assert_eq!(
        (s.preempted, s.failovers, f.preempted, f.until),
        (2, 1, 2, ctx.now() + Duration::minutes(30))
    );
    // The VMs made now are standard, marked as made by the failover.
    ctx.finished::<CreateVm>().await;
    crate::tasks::create_vm::run(&ctx, CreateVm { id: "spot-2".into() }).await.unwrap();
    let made = vm(&ctx, "spot-2").await.expect("made");
    assert!(made.failover && !made.attributes.preemptible(), "{:?}", made.attributes);
    assert_eq!(
        (made.attributes.provisioning_model.as_str(), made.attributes.instance_termination_action.as_str()),
        ("STANDARD", "")
    );
    let spec = crate::providers::gce_insert::instance_spec(&made, "test");
    assert!(!spec.attributes.preemptible(), "Compute is asked for a standard instance");
    let st = crate::fleet::status::status(&*ctx.ports.store, "spot", ctx.now(), Duration::zero(), true)
        .await
        .unwrap();
    let sp = st.spot.expect("shown");
    assert_eq!((sp.failover, sp.preempted_total, sp.failovers_total), (Some(f), 2, 1));
}

#[tokio::test]
async fn a_preemption_whose_count_was_cut_short_is_counted_by_the_next_run() {
    let (ctx, _) = setup(3, 3).await;
    // The fault was recorded, then the run stopped before counting it.
    let mut v = spot_vm(&ctx, "spot-0", true).await;
    v = crate::records::writes::update_vm(&ctx, &v.id, |v| {
        v.fault = Some(crate::model::Fault {
            unknown: Default::default(),
            kind: crate::model::FaultKind::InstanceDown,
            detail: "instance TERMINATED".into(),
            at: ctx.now(),
        });
        true
    })
    .await
    .unwrap()
    .unwrap();
    crate::fleet::lifecycle::replace_down(&ctx, &v, Some("TERMINATED"), "manage_bot").await.unwrap();
    crate::fleet::lifecycle::replace_down(&ctx, &v, Some("TERMINATED"), "manage_bot").await.unwrap();
    assert_eq!(state(&ctx).await.preempted, 1);
}

#[tokio::test]
async fn what_is_no_spot_preemption_is_not_counted() {
    let (ctx, _) = setup(4, 0).await;
    // A standard VM made by a failover, a parked Spot VM, a Spot VM being retired.
    let standard = ctx
        .seed_vm("spot-0", |v| {
            created(ctx.now())(v);
            v.attributes = spot_config(4, 0).attributes_in("z").standard();
            v.failover = true;
        })
        .await;
    let mut parked = spot_vm(&ctx, "spot-1", true).await;
    parked.parked = Some(crate::model::parked::Parked {
        unknown: Default::default(),
        how: crate::model::parked::Park::Stop,
        since: ctx.now(),
        done: true,
        waking: None,
        operation: String::new(),
        turns: 0,
    });
    let mut drained = spot_vm(&ctx, "spot-2", true).await;
    drained.drained = true;
    for v in [&standard, &parked, &drained] {
        crate::fleet::lifecycle::replace_down(&ctx, v, Some("TERMINATED"), "manage_bot").await.unwrap();
    }
    assert_eq!(state(&ctx).await, SpotState::default(), "more_than 0, and nothing counted");
    // A Spot pool without spot_failover keeps no state.
    let mut c = spot_config(4, 0);
    c.spot_failover = None;
    crate::operate::apply(&ctx, c, "t").await.unwrap();
    let v = spot_vm(&ctx, "spot-3", true).await;
    crate::fleet::lifecycle::replace_down(&ctx, &v, Some("TERMINATED"), "manage_bot").await.unwrap();
    assert_eq!(state(&ctx).await, SpotState::default());
}

fn refusal(code: &str) -> ComputeError {
    ComputeError::from_operation(code, Some(503), "no Spot capacity")
}

#[tokio::test]
async fn refused_spot_inserts_fail_the_pool_over_and_its_unsent_spot_vms_are_made_standard() {
    let (ctx, f) = setup(3, 1).await;
    for id in ["spot-0", "spot-1", "spot-2"] {
        spot_vm(&ctx, id, false).await;
    }
    // Refused outright.
    f.compute.inserts.lock().unwrap().push_back(Err(refusal("ZONE_RESOURCE_POOL_EXHAUSTED")));
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "spot-0".into() }).await.unwrap();
    let s = state(&ctx).await;
    assert_eq!((s.refused, s.failover.is_none()), (1, true));
    assert!(vm(&ctx, "spot-0").await.is_some(), "kept (no failover yet): tried again after the backoff");
    // Refused by its operation (spot-1 was sent before the zone backed off).
    let sent = crate::records::writes::update_vm(&ctx, "spot-1", |v| {
        v.insert_sent = Some(ctx.now());
        v.operation = "op-1".into();
        true
    })
    .await
    .unwrap()
    .unwrap();
    let cur = ctx.ports.store.vm("spot-1").await.unwrap().unwrap();
    let op = Operation { name: "op-1".into(), done: true, error: Some(refusal("QUOTA_EXCEEDED")) };
    crate::providers::gce_insert::follow(&ctx, cur.clone(), op.clone()).await.unwrap();
    // The same refusal told again (a task run twice) is counted once.
    crate::placement::spot::refused(&ctx, &sent, "QUOTA_EXCEEDED", "op-1").await.unwrap();
    let s = state(&ctx).await;
    assert_eq!((s.refused, s.failovers), (2, 1), "more than 1: failed over");
    // Every Spot VM not sent is made again, standard.
    for id in ["spot-0", "spot-1", "spot-2"] {
        assert!(vm(&ctx, id).await.is_none(), "{id} dropped");
    }
    assert_eq!(ctx.finished::<crate::work::ExpandConfig>().await.len(), 1);
    crate::tasks::expand_config::run(&ctx, crate::work::ExpandConfig { prefix: "spot".into() })
        .await
        .unwrap();
    for id in ["spot-0", "spot-1", "spot-2"] {
        let v = vm(&ctx, id).await.expect("made again");
        assert!(v.failover && v.attributes.provisioning_model == "STANDARD", "{id}");
    }
}

#[tokio::test]
async fn a_spot_refusal_backs_off_the_zones_spot_capacity_only_so_a_failovers_standard_vms_go_at_once() {
    let (ctx, f) = setup(2, 0).await;
    spot_vm(&ctx, "spot-0", false).await;
    let spot_1 = spot_vm(&ctx, "spot-1", false).await;
    f.compute.inserts.lock().unwrap().push_back(Err(refusal("ZONE_RESOURCE_POOL_EXHAUSTED")));
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "spot-0".into() }).await.unwrap();
    // What backs off is the zone's Spot capacity, not the zone: a Spot VM there waits for it.
    assert!(ctx.ports.store.backoff("test-project", "z/spot").await.unwrap().is_some());
    assert!(ctx.ports.store.backoff("test-project", "z").await.unwrap().is_none());
    assert!(crate::placement::backoff::wait_for(&ctx, &spot_1).await.unwrap().is_some());
    // Failed over (more than 0): the VMs are made again standard, and the first is sent at once.
    assert_eq!(state(&ctx).await.failovers, 1);
    crate::tasks::expand_config::run(&ctx, crate::work::ExpandConfig { prefix: "spot".into() })
        .await
        .unwrap();
    let again = vm(&ctx, "spot-0").await.expect("made again");
    assert!(again.failover && !again.attributes.preemptible());
    assert!(
        crate::placement::backoff::wait_for(&ctx, &again).await.unwrap().is_none(),
        "not held by the Spot backoff"
    );
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "spot-0".into() }).await.unwrap();
    let inserts: Vec<String> = f.compute.calls().into_iter().filter(|c| c.starts_with("insert ")).collect();
    assert_eq!(inserts.len(), 2, "the Spot one refused, then the standard one: {inserts:?}");
    assert!(inserts[1].contains(&again.hostname), "{inserts:?}");
    assert!(vm(&ctx, "spot-0").await.unwrap().instance.is_some());
}

#[tokio::test]
async fn a_refusal_of_a_standard_insert_or_an_invalid_spot_insert_is_not_counted() {
    let (ctx, f) = setup(3, 0).await;
    ctx.seed_vm("spot-0", |v| {
        v.attributes = spot_config(3, 0).attributes_in("z").standard();
        v.failover = true;
    })
    .await;
    spot_vm(&ctx, "spot-1", false).await;
    f.compute.inserts.lock().unwrap().push_back(Err(refusal("ZONE_RESOURCE_POOL_EXHAUSTED")));
    f.compute.inserts.lock().unwrap().push_back(Err(ComputeError::from_http(
        Some(400),
        "invalid",
        "bad disk",
    )));
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "spot-0".into() }).await.unwrap();
    ctx.ports.store.set_backoff("test-project", "z", None).await.unwrap();
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "spot-1".into() }).await.unwrap();
    assert_eq!(f.compute.calls().iter().filter(|c| c.starts_with("insert")).count(), 2, "both sent");
    assert_eq!(state(&ctx).await, SpotState::default());
}

#[tokio::test]
async fn after_the_cooldown_the_failover_ends_once_and_new_vms_are_spot_again() {
    let (ctx, f) = setup(3, 1).await;
    let until = ctx.now() + Duration::minutes(30);
    crate::records::writes::update_config(&ctx, "spot", |r| {
        r.spot.failover =
            Some(Failover { unknown: Default::default(), since: ctx.now(), until, preempted: 2, refused: 0 });
        Ok::<_, TaskError>(true)
    })
    .await
    .unwrap();
    crate::tasks::create_vm::run(&ctx, CreateVm { id: "spot-0".into() }).await.unwrap();
    let standard = vm(&ctx, "spot-0").await.unwrap();
    assert!(standard.failover);
    let expand =
        || crate::tasks::expand_config::run(&ctx, crate::work::ExpandConfig { prefix: "spot".into() });
    expand().await.unwrap();
    assert!(state(&ctx).await.failover.is_some(), "still in force");
    assert!(vm(&ctx, "spot-1").await.unwrap().failover, "made standard while in force");
    f.clock.advance(Duration::minutes(30));
    let st = crate::fleet::status::status(&*ctx.ports.store, "spot", ctx.now(), Duration::zero(), true)
        .await
        .unwrap();
    assert!(st.spot.unwrap().failover.is_none(), "status says it is over before anything runs");
    expand().await.unwrap();
    assert!(state(&ctx).await.failover.is_none(), "ended");
    // A VM made from now on (spot-2's record gone before it was sent) is Spot again.
    let gone = ctx.ports.store.vm("spot-2").await.unwrap().unwrap();
    assert!(ctx.ports.store.delete_vm("spot-2", gone.version).await.unwrap());
    expand().await.unwrap();
    let spot = vm(&ctx, "spot-2").await.unwrap();
    assert!(!spot.failover && spot.attributes.provisioning_model == "SPOT");
    // The standard VM is not replaced before its lifetime ends.
    assert!(!vm(&ctx, "spot-0").await.unwrap().drained);
    assert!(!crate::model::outdated(
        &ctx.ports.store.config("spot").await.unwrap().unwrap().value.config,
        &standard
    ));
}

#[tokio::test]
async fn a_rolling_update_does_not_take_failover_vms_for_outdated_ones() {
    let (ctx, _) = setup(2, 1).await;
    let old = spot_vm(&ctx, "spot-0", true).await;
    let mut c = spot_config(2, 1);
    c.attributes.disk[0].image = "global/images/y".into();
    crate::operate::apply(&ctx, c.clone(), "t").await.unwrap();
    ctx.seed_vm("spot-1", |v| {
        created(ctx.now())(v);
        v.connected = Some(ctx.now());
        v.attributes = c.attributes_in("z").standard();
        v.failover = true;
    })
    .await;
    crate::tasks::expand_config::run(&ctx, crate::work::ExpandConfig { prefix: "spot".into() })
        .await
        .unwrap();
    let r = ctx.ports.store.config("spot").await.unwrap().unwrap().value.rollout.expect("rolling");
    assert_eq!((r.updated, r.outdated), (1, 1), "the failover VM has the new attributes");
    assert!(vm(&ctx, "spot-0").await.unwrap().drained, "{} is outdated: retired", old.id);
    assert!(!vm(&ctx, "spot-1").await.unwrap().drained, "the failover VM stays");
}
