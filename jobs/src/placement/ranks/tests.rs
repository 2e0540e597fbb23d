//! Unit tests of `ranks.rs`: the rank a zone gives a new VM, a refusal of rank 0 moving the VM to
//! rank 1 at once (alone and in bulk), rank 0 again once its backoff ends, and zones and ranks
//! together.

use std::sync::Arc;

use chrono::TimeZone;

use super::*;
use crate::config::Limits;
use crate::ctx::Ctx;
use crate::ports::compute::ComputeError;
use crate::work::{BulkInsert, CreateInstance, CreateVm, ExpandConfig, Next};
use crate::{placement::backoff, placement::backoff::Scope};

fn off(minute: u32) -> Option<Backoff> {
    let until = Utc.with_ymd_and_hms(2026, 11, 21, 11, minute, 0).unwrap();
    Some(Backoff {
        unknown: Default::default(),
        project: "p".into(),
        zone: "z".into(),
        until,
        failures: 1,
        reason: "STOCKOUT".into(),
    })
}

fn zone(backoff: Option<Backoff>, ranks: Vec<Option<Backoff>>) -> ZoneRanks {
    ZoneRanks { zone: "z".into(), backoff, ranks }
}

#[test]
fn a_zone_gives_the_first_rank_that_does_not_back_off() {
    assert_eq!(zone(None, vec![None, None, None]).rank(), 0, "the preferred one");
    assert_eq!(zone(None, vec![off(5), None, None]).rank(), 1);
    assert_eq!(zone(None, vec![off(5), off(5), None]).rank(), 2);
    assert_eq!(zone(None, vec![None, off(5), None]).rank(), 0, "rank 0 back once its backoff ended");
    let all = zone(None, vec![off(9), off(3), off(5)]);
    assert_eq!((all.open_rank(), all.rank()), (None, 1), "none open: the one that ends first");
    let shut = zone(off(1), vec![None, None]);
    assert_eq!((shut.open_rank(), shut.rank()), (None, 0), "the zone backs off: every rank waits");
    // A Config without fallbacks: one rank, the zone's backoff alone.
    assert_eq!(zone(None, vec![]).open_rank(), Some(0));
    assert_eq!(zone(off(1), vec![]).open_rank(), None);
    assert!(zone(None, vec![off(1), None]).is_open(1) && !zone(None, vec![off(1), None]).is_open(0));
}

/// A Config of `amount` VMs in zone `z` (or `zones`) with rank 1 `n2d-standard-2`.
async fn ranked(ctx: &Ctx, amount: u32, zones: &[(&str, u32)]) {
    ctx.seed_config_with("linux", amount, |c| {
        if !zones.is_empty() {
            *c = crate::testing::zoned(c.clone(), zones);
        }
        c.fallback_machine_types = vec!["zones/{{.Zone}}/machineTypes/n2d-standard-2".into()];
    })
    .await;
}

async fn vm(ctx: &Ctx, id: &str) -> Option<Vm> {
    ctx.ports.store.vm(id).await.unwrap().map(|v| v.value)
}

fn stockout() -> ComputeError {
    ComputeError::from_operation("ZONE_RESOURCE_POOL_EXHAUSTED", Some(503), "no room for e2-small in z")
}

#[tokio::test]
async fn a_stockout_of_rank_0_makes_the_vm_again_on_rank_1_at_once_and_rank_0_comes_back_after_its_backoff() {
    let (ctx, f) = Ctx::test();
    ranked(&ctx, 2, &[]).await;
    crate::tasks::create_vm::run(&ctx, CreateVm { id: "linux-0".into() }).await.unwrap();
    let first = vm(&ctx, "linux-0").await.unwrap();
    assert_eq!(
        (first.rank, first.attributes.machine_type.as_str()),
        (Some(0), "zones/z/machineTypes/e2-small")
    );
    f.compute.inserts.lock().unwrap().push_back(Err(stockout()));
    let next =
        crate::tasks::create_instance::run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert_eq!(next, Next::Done, "no wait for the backoff");
    assert!(vm(&ctx, "linux-0").await.is_none(), "dropped: it had no instance");
    assert_eq!(ctx.taken::<ExpandConfig>().await.len(), 1, "made again at once");
    let rank0 = Scope("test-project".into(), "z/e2-small".into());
    assert!(backoff::active(&ctx, &rank0).await.unwrap().is_some(), "rank 0's machine type backs off");
    assert!(
        backoff::active(&ctx, &Scope("test-project".into(), "z".into())).await.unwrap().is_none(),
        "not the zone"
    );
    crate::tasks::create_vm::run(&ctx, CreateVm { id: "linux-0".into() }).await.unwrap();
    let again = vm(&ctx, "linux-0").await.unwrap();
    assert_eq!(
        (again.rank, again.attributes.machine_type.as_str()),
        (Some(1), "zones/z/machineTypes/n2d-standard-2")
    );
    assert_eq!(again.place(), "z#1");
    f.compute.calls.lock().unwrap().clear();
    ctx.taken::<CreateInstance>().await;
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert!(f.compute.calls()[0].starts_with(&format!("insert {} ", again.hostname)), "sent at once");
    assert!(vm(&ctx, "linux-0").await.unwrap().instance.is_some());
    // Once rank 0's backoff is over, the next VM is made on it again.
    f.clock.advance(chrono::Duration::hours(1));
    crate::tasks::create_vm::run(&ctx, CreateVm { id: "linux-1".into() }).await.unwrap();
    assert_eq!(vm(&ctx, "linux-1").await.unwrap().rank, Some(0));
    let placed = |r| crate::model::counters::placed(r);
    let counted = (
        ctx.ports.store.counter("linux", &placed(0)).await.unwrap(),
        ctx.ports.store.counter("linux", &placed(1)).await.unwrap(),
    );
    assert_eq!(counted, (2, 1), "placements per rank");
    let ranks = crate::records::counts::rank_sums(&*ctx.ports.store, "linux").await.unwrap();
    assert_eq!((ranks[&0][0], ranks[&1][0], ranks[&1][1]), (1, 1, 1), "VMs per rank; rank 1's made");
}

#[tokio::test]
async fn a_bulk_refused_for_capacity_backs_off_its_rank_and_its_vms_move_to_the_next() {
    let (mut ctx, f) = Ctx::test();
    ctx.settings.limits = Arc::new(Limits { bulk_min: 2, ..Limits::default() });
    ranked(&ctx, 3, &[]).await;
    for i in 0..3 {
        crate::tasks::create_vm::run(&ctx, CreateVm { id: format!("linux-{i}") }).await.unwrap();
    }
    let no_room = ComputeError::from_http(Some(503), "insufficientCapacity", "no room for e2-small");
    f.compute.inserts.lock().unwrap().push_back(Err(no_room));
    crate::tasks::bulk_insert::run(&ctx, BulkInsert { prefix: "linux".into() }).await.unwrap();
    assert!(f.compute.calls()[0].starts_with("bulk_insert "), "{:?}", f.compute.calls());
    assert!(ctx.ports.store.backoff("test-project", "z/e2-small").await.unwrap().is_some());
    assert!(ctx.ports.store.backoff("test-project", "z").await.unwrap().is_none(), "the zone stays open");
    ctx.taken::<ExpandConfig>().await;
    for c in ctx.taken::<CreateInstance>().await {
        crate::tasks::create_instance::run(&ctx, c).await.unwrap();
    }
    for i in 0..3 {
        assert!(vm(&ctx, &format!("linux-{i}")).await.is_none(), "linux-{i} dropped, made again");
        crate::tasks::create_vm::run(&ctx, CreateVm { id: format!("linux-{i}") }).await.unwrap();
        assert_eq!(vm(&ctx, &format!("linux-{i}")).await.unwrap().rank, Some(1));
    }
    assert!(!ctx.taken::<ExpandConfig>().await.is_empty());
    // Sent on rank 1, in a bulk of its own machine type.
    f.compute.calls.lock().unwrap().clear();
    crate::tasks::bulk_insert::run(&ctx, BulkInsert { prefix: "linux".into() }).await.unwrap();
    assert!(f.compute.calls()[0].starts_with("bulk_insert "), "{:?}", f.compute.calls());
    for i in 0..3 {
        assert!(vm(&ctx, &format!("linux-{i}")).await.unwrap().instance.is_some());
    }
}

#[tokio::test]
async fn a_zone_stays_open_while_one_of_its_ranks_does_and_closes_when_none_does() {
    let (ctx, _) = Ctx::test();
    ranked(&ctx, 4, &[("a", 1), ("b", 1)]).await;
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    ctx.seed_vm("linux-0", |v| v.attributes.zone = "b".into()).await;
    let hit = |zone: &str| {
        let s = Scope("test-project".into(), zone.into());
        let ctx = ctx.clone();
        async move { backoff::hit(&ctx, &s, "ZONE_RESOURCE_POOL_EXHAUSTED").await.unwrap() }
    };
    assert_eq!(crate::placement::zones::places(&ctx, &rec, 1).await.unwrap()[0], ("a".to_owned(), Some(0)));
    hit("a/e2-small").await;
    assert_eq!(
        crate::placement::zones::places(&ctx, &rec, 1).await.unwrap()[0],
        ("a".to_owned(), Some(1)),
        "the next rank, same zone"
    );
    hit("a/n2d-standard-2").await;
    assert_eq!(
        crate::placement::zones::places(&ctx, &rec, 1).await.unwrap()[0],
        ("b".to_owned(), Some(0)),
        "a closed: b"
    );
    // A VM not sent yet on a rank that backs off is made again while another (zone, rank) is open.
    let waiting = ctx
        .seed_vm("linux-2", |v| {
            v.attributes.zone = "a".into();
            v.rank = Some(1);
        })
        .await;
    assert!(elsewhere(&ctx, &waiting).await.unwrap());
    hit("b").await;
    assert!(!elsewhere(&ctx, &waiting).await.unwrap(), "nowhere better");
}

/// Backs off scope `zone` of the test project for 5 minutes.
async fn back_off(ctx: &Ctx, zone: &str) {
    let until = ctx.now() + chrono::Duration::minutes(5);
    let b = Backoff {
        unknown: Default::default(),
        project: "test-project".into(),
        zone: zone.into(),
        until,
        failures: 1,
        reason: "STOCKOUT".into(),
    };
    ctx.ports.store.set_backoff("test-project", zone, Some(&b)).await.unwrap();
}

async fn backs_off(ctx: &Ctx, zone: &str) -> bool {
    ctx.ports.store.backoff("test-project", zone).await.unwrap().is_some()
}

#[tokio::test]
async fn spot_capacity_backs_off_apart_from_standard_capacity_per_rank_and_per_zone() {
    let (ctx, _) = Ctx::test();
    ranked(&ctx, 2, &[]).await;
    let c = ctx.ports.store.config("linux").await.unwrap().unwrap().value.config;
    // Another Config's Spot VMs were refused in z, and Spot e2-small there too.
    back_off(&ctx, "z/spot").await;
    back_off(&ctx, "z/e2-small/spot").await;
    let standard = grid(&*ctx.ports.store, &c, false, ctx.now()).await.unwrap();
    assert_eq!((standard[0].backoff.is_some(), standard[0].rank()), (false, 0), "standard VMs: rank 0");
    let spot = grid(&*ctx.ports.store, &c, true, ctx.now()).await.unwrap();
    assert_eq!(
        (spot[0].backoff.is_some(), spot[0].rank()),
        (false, 1),
        "Spot VMs of a ranked Config: rank 1; the zone's Spot scope is not theirs"
    );
    // A ranked Spot VM made on rank 1 ends its own scope's backoff, not the others'.
    let mut vm = Vm { config: "linux".into(), rank: Some(1), ..Vm::default() };
    vm.attributes = c.attributes_on("z", 1).unwrap();
    vm.attributes.provisioning_model = "SPOT".into();
    back_off(&ctx, "z/n2d-standard-2/spot").await;
    back_off(&ctx, "z").await;
    assert_eq!(Scope::refused(&vm), Scope("test-project".into(), "z/n2d-standard-2/spot".into()));
    backoff::clear_for(&ctx, &vm).await.unwrap();
    assert!(!backs_off(&ctx, "z/n2d-standard-2/spot").await, "its own scope ends");
    for other in ["z", "z/spot", "z/e2-small/spot"] {
        assert!(backs_off(&ctx, other).await, "{other} stays");
    }
}
