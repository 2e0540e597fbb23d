//! Unit tests of `tasks/expand_config.rs`.

use crate::work::{CreateInstance, DrainVm, ParkVm};

use super::*;

#[tokio::test]
async fn makes_the_missing_vms_only_and_hands_them_to_create_instance() {
    let (ctx, _) = Ctx::test();
    run(&ctx, ExpandConfig { prefix: "none".into() }).await.unwrap();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-1", |_| {}).await;
    let next = run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    let ids: Vec<String> = ctx.taken::<CreateInstance>().await.into_iter().map(|t| t.id).collect();
    assert_eq!(ids, ["linux-0", "linux-2"]);
    assert_eq!(next, Next::Done, "nothing left: no second batch");
}

#[tokio::test]
async fn a_large_amount_goes_out_in_batches_that_reread_the_config() {
    let (mut ctx, _) = Ctx::test();
    ctx.settings.limits = std::sync::Arc::new(crate::config::Limits {
        expand_batch: 4,
        creating_per_config: 6,
        ..Default::default()
    });
    ctx.seed_config("linux", 10).await;
    let next = run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert_eq!(made(&ctx).await, ["linux-0", "linux-1", "linux-2", "linux-3"], "one batch");
    assert_eq!(next, Next::After(BATCH_PAUSE), "it looks again for the rest");
    // Four VMs now wait for their instance: only two more fit under creating_per_config.
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert_eq!(made(&ctx).await[4..], ["linux-4", "linux-5"]);
    // The amount is lowered between batches: the next one creates nothing more.
    let cfg = ctx.ports.store.config("linux").await.unwrap().unwrap();
    let mut rec = cfg.value;
    rec.config.amount.min = 4;
    rec.config.amount.max = 4;
    rec.current_amount = 4;
    ctx.ports.store.put_config(&rec, Expect::Version(cfg.version)).await.unwrap();
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert_eq!(made(&ctx).await.len(), 6, "nothing more made");
    let drained: Vec<String> = ctx.taken::<DrainVm>().await.into_iter().map(|t| t.id).collect();
    assert_eq!(drained, ["linux-4", "linux-5"], "made past 4: drained at once");
}

#[tokio::test]
async fn a_shrink_drains_the_surplus_at_once() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    for id in ["linux-0", "linux-1", "linux-2"] {
        ctx.seed_vm(id, |_| {}).await;
    }
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    let ids: Vec<String> = ctx.taken::<DrainVm>().await.into_iter().map(|t| t.id).collect();
    assert_eq!(ids, ["linux-1", "linux-2"]);
}

#[tokio::test]
async fn a_paused_config_creates_nothing_and_still_drains_its_surplus() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    for id in ["linux-0", "linux-1", "linux-3"] {
        ctx.seed_vm(id, |_| {}).await;
    }
    crate::operate::pause(&ctx, "linux", "rollout", "bob").await.unwrap();
    let next = run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert_eq!(next, Next::Done, "resuming pushes it again");
    assert!(ctx.taken::<CreateInstance>().await.is_empty());
    assert_eq!(ctx.taken::<DrainVm>().await, [DrainVm { id: "linux-3".into() }]);
}

/// Config `linux` with bounds 0..=9 and `n` connected VMs; those in `busy` run a task, the
/// others have been idle for `i` minutes (the lower index the longer).
async fn busy_pool(ctx: &Ctx, n: u32, busy: &[u32]) {
    ctx.seed_config_with("linux", n, |c| {
        c.amount.min = 0;
        c.amount.max = 9;
    })
    .await;
    let now = ctx.now();
    for i in 0..n {
        let vm = ctx
            .seed_vm(&format!("linux-{i}"), |v| {
                crate::testing::created(now)(v);
                v.connected = Some(now);
            })
            .await;
        let task_id = if busy.contains(&i) { format!("t{i}") } else { String::new() };
        let bot = crate::model::Bot { id: vm.hostname.clone(), task_id, ..Default::default() };
        let idle_since = (!busy.contains(&i)).then(|| now - chrono::TimeDelta::minutes(i64::from(10 - i)));
        ctx.ports.store.put_bots(&[crate::model::Observed { unknown: Default::default(), bot, at: now, idle_since }]).await.unwrap();
    }
}

async fn set_amount(ctx: &Ctx, amount: u32) {
    crate::records::writes::update_config::<TaskError>(ctx, "linux", |r| {
        r.current_amount = amount;
        Ok(true)
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_shrinking_pool_drains_idle_bots_first_and_keeps_the_busy_ones() {
    let (ctx, _) = Ctx::test();
    busy_pool(&ctx, 4, &[1, 3]).await;
    set_amount(&ctx, 3).await;
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    // 0 has been idle longest: it goes, not 3 (the highest index, busy).
    assert_eq!(ctx.taken::<DrainVm>().await, [DrainVm { id: "linux-0".into() }]);
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!(rec.wanted(), [1, 2, 3]);
    set_amount(&ctx, 2).await;
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    let drained: Vec<String> = ctx.taken::<DrainVm>().await.into_iter().map(|d| d.id).collect();
    assert!(drained.contains(&"linux-2".to_owned()) && !drained.contains(&"linux-3".to_owned()), "{drained:?}");
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!(rec.wanted(), [1, 3], "both busy bots stay");
    assert!(!rec.wants(0) && !rec.wants(2));
}

#[tokio::test]
async fn growth_refills_gone_indexes_first_and_skips_those_still_draining() {
    let (ctx, _) = Ctx::test();
    busy_pool(&ctx, 4, &[1, 3]).await;
    set_amount(&ctx, 2).await;
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    ctx.taken::<DrainVm>().await;
    // 0 is gone, 2 still drains.
    let v0 = ctx.ports.store.vm("linux-0").await.unwrap().unwrap();
    assert!(ctx.ports.store.delete_vm("linux-0", v0.version).await.unwrap());
    crate::records::writes::update_vm(&ctx, "linux-2", |v| {
        v.drained = true;
        true
    })
    .await
    .unwrap();
    set_amount(&ctx, 4).await;
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    let made: Vec<String> = ctx.taken::<CreateInstance>().await.into_iter().map(|c| c.id).collect();
    assert_eq!(made, ["linux-0", "linux-4"]);
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!(rec.wanted(), [0, 1, 3, 4]);
}

#[tokio::test]
async fn a_warm_pool_parks_idle_vms_let_go_and_wakes_them_before_making_new_ones() {
    let (ctx, _) = Ctx::test();
    busy_pool(&ctx, 4, &[1, 3]).await;
    crate::records::writes::update_config::<TaskError>(&ctx, "linux", |r| {
        r.config.warm = Some(crate::config::Warm { unknown: Default::default(), suspended: 2, stopped: 0 });
        r.current_amount = 2;
        Ok(true)
    })
    .await
    .unwrap();
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!((rec.wanted(), rec.warm.iter().copied().collect::<Vec<_>>()), (vec![1, 3], vec![0, 2]));
    let mut parked: Vec<String> = ctx.finished::<ParkVm>().await.into_iter().map(|p| p.id).collect();
    parked.sort();
    assert_eq!(parked, ["linux-0", "linux-2"], "kept warm, not drained");
    assert!(ctx.taken::<DrainVm>().await.is_empty());
    // They are parked; the pool grows by one: the first is woken, nothing is made.
    park_all(&ctx, &["linux-0", "linux-2"]).await;
    set_amount(&ctx, 3).await;
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    // Index 0 is woken, not made; the warm pool (2 beyond the amount) gets a new VM, index 4.
    assert_eq!(ctx.taken::<CreateInstance>().await, [CreateInstance { id: "linux-4".into() }]);
    let parked = [ParkVm { id: "linux-0".into() }, ParkVm { id: "linux-4".into() }];
    assert_eq!(ctx.finished::<ParkVm>().await, parked, "0 woken, 4 followed until it parks");
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!((rec.wanted(), rec.waking.iter().copied().collect::<Vec<_>>()), (vec![0, 1, 3], vec![0]));
    // Until it is awake, every look asks again.
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert_eq!(ctx.taken::<ParkVm>().await, [ParkVm { id: "linux-0".into() }]);
}

#[tokio::test]
async fn growing_into_an_index_kept_warm_wakes_its_vm() {
    let (ctx, _) = Ctx::test();
    busy_pool(&ctx, 2, &[]).await;
    // Shrunk to nothing: both kept warm, parked.
    crate::records::writes::update_config::<TaskError>(&ctx, "linux", |r| {
        r.config.warm = Some(crate::config::Warm { unknown: Default::default(), suspended: 2, stopped: 0 });
        r.current_amount = 0;
        Ok(true)
    })
    .await
    .unwrap();
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    ctx.finished::<ParkVm>().await;
    park_all(&ctx, &["linux-0", "linux-1"]).await;
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!((rec.wanted(), rec.warm.len()), (vec![], 2));
    // One is wanted again: index 0, kept warm, is woken (not made anew).
    set_amount(&ctx, 1).await;
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert_eq!(ctx.taken::<CreateInstance>().await, [CreateInstance { id: "linux-2".into() }], "only the warm pool's refill");
    let parked = [ParkVm { id: "linux-0".into() }, ParkVm { id: "linux-2".into() }];
    assert_eq!(ctx.finished::<ParkVm>().await, parked, "0 woken, 2 followed until it parks");
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!(rec.waking.iter().copied().collect::<Vec<_>>(), [0]);
}

#[tokio::test]
async fn a_demand_pool_fills_its_warm_pool_at_rest_and_lends_it_to_a_burst() {
    let (ctx, _) = Ctx::test();
    busy_pool(&ctx, 1, &[]).await;
    let demand = |target| {
        move |r: &mut ConfigRecord| {
            r.config.warm = Some(crate::config::Warm { unknown: Default::default(), suspended: 3, stopped: 0 });
            r.config.demand = Some(crate::config::Demand { min_idle: 1, ..Default::default() });
            r.demand = Some(crate::model::demand_reading::DemandState { target, ..Default::default() });
            Ok(true)
        }
    };
    crate::records::writes::update_config::<TaskError>(&ctx, "linux", demand(1)).await.unwrap();
    // At rest (min_idle 1): three new VMs are made for the warm pool, each to be parked once up.
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!((rec.wanted(), rec.warm.iter().copied().collect::<Vec<_>>()), (vec![0], vec![1, 2, 3]));
    let made: Vec<String> = ctx.taken::<CreateInstance>().await.into_iter().map(|c| c.id).collect();
    assert_eq!(made, ["linux-1", "linux-2", "linux-3"]);
    for id in ["linux-1", "linux-2", "linux-3"] {
        assert!(ctx.ports.store.vm(id).await.unwrap().is_some(), "{id} made");
        crate::records::writes::update_vm(&ctx, id, |v| {
            crate::testing::created(v.configured)(v);
            true
        })
        .await
        .unwrap();
    }
    // Each new VM record has park_vm follow it (it parks once the bot has connected).
    let mut following: Vec<String> = ctx.taken::<ParkVm>().await.into_iter().map(|p| p.id).collect();
    following.sort();
    assert_eq!(following, ["linux-1", "linux-2", "linux-3"]);
    park_all(&ctx, &["linux-1", "linux-2", "linux-3"]).await;
    // Looked at again, full: nothing more is made.
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert!(ctx.taken::<CreateInstance>().await.is_empty());
    // A burst of two: two are woken and lent; none is made to take their place.
    crate::records::writes::update_config::<TaskError>(&ctx, "linux", demand(3)).await.unwrap();
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert!(ctx.taken::<CreateInstance>().await.is_empty(), "a burst borrows from the warm pool");
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!((rec.wanted(), rec.warm.iter().copied().collect::<Vec<_>>()), (vec![0, 1, 2], vec![3]));
    assert_eq!(rec.waking.iter().copied().collect::<Vec<_>>(), [1, 2]);
}

#[tokio::test]
async fn a_burst_wakes_warm_vms_above_a_gap_instead_of_making_vms_in_it() {
    let (ctx, _) = Ctx::test();
    // VMs 0-2 idle (min_idle 3), 5 and 6 parked in the warm pool, no VM under 3 and 4.
    busy_pool(&ctx, 7, &[]).await;
    for id in ["linux-3", "linux-4"] {
        let v = ctx.ports.store.vm(id).await.unwrap().unwrap();
        assert!(ctx.ports.store.delete_vm(id, v.version).await.unwrap());
    }
    park_all(&ctx, &["linux-5", "linux-6"]).await;
    let demand = |target| {
        move |r: &mut ConfigRecord| {
            r.config.warm = Some(crate::config::Warm { unknown: Default::default(), suspended: 2, stopped: 0 });
            r.config.demand = Some(crate::config::Demand { min_idle: 3, ..Default::default() });
            r.demand = Some(crate::model::demand_reading::DemandState { target, ..Default::default() });
            r.warm = [5, 6].into();
            r.let_go.clear();
            Ok(true)
        }
    };
    crate::records::writes::update_config::<TaskError>(&ctx, "linux", demand(3)).await.unwrap();
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert!(ctx.taken::<CreateInstance>().await.is_empty(), "at rest, full: nothing made");
    // A burst of two: 5 and 6 are woken; nothing is made under 3 and 4.
    crate::records::writes::update_config::<TaskError>(&ctx, "linux", |r| {
        r.demand = Some(crate::model::demand_reading::DemandState { target: 5, ..Default::default() });
        Ok(true)
    })
    .await
    .unwrap();
    run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert!(ctx.taken::<CreateInstance>().await.is_empty(), "woken, not made");
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!((rec.wanted(), rec.waking.iter().copied().collect::<Vec<_>>()), (vec![0, 1, 2, 5, 6], vec![5, 6]));
}

/// The ids of Config `linux`'s VM records, by index.
async fn made(ctx: &Ctx) -> Vec<String> {
    let mut ids = ctx.ports.store.vm_ids(VmIndex::OfConfig("linux".into())).await.unwrap();
    ids.sort_by_key(|id| crate::naming::parse_id(id).map(|(_, i)| i));
    ids
}

/// Records VMs `ids` as suspended in the warm pool.
async fn park_all(ctx: &Ctx, ids: &[&str]) {
    for id in ids {
        crate::records::writes::update_vm(ctx, id, |v| {
            v.parked = Some(crate::model::parked::Parked { unknown: Default::default(),
                how: crate::model::parked::Park::Suspend,
                since: v.configured,
                done: true,
                waking: None,
                operation: String::new(),
                turns: 1,
            });
            true
        })
        .await
        .unwrap();
    }
}
