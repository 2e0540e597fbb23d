//! Unit tests of `rollout.rs`.

use super::*;
use crate::ctx::Ctx;
use crate::testing::created;
use crate::work::{CreateInstance, ExpandConfig};
use chrono::{DateTime, Utc};

fn up(now: DateTime<Utc>) -> impl FnOnce(&mut Vm) {
    move |v| {
        created(now)(v);
        v.connected = Some(now);
    }
}

async fn expand(ctx: &Ctx) {
    crate::tasks::expand_config::run(ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
}

async fn drained(ctx: &Ctx, ids: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for id in ids {
        if ctx.ports.store.vm(id).await.unwrap().is_some_and(|v| v.value.drained) {
            out.push((*id).to_owned());
        }
    }
    out
}

#[tokio::test]
async fn a_new_image_rolls_one_surge_vm_at_a_time_and_an_amount_change_rolls_nothing() {
    let (ctx, _) = Ctx::test();
    let mut c = crate::testing::config("linux", 2);
    crate::operate::apply(&ctx, c.clone(), "t").await.unwrap();
    for id in ["linux-0", "linux-1"] {
        ctx.seed_vm(id, up(ctx.now())).await;
    }
    c.amount.max = 3;
    crate::operate::apply(&ctx, c.clone(), "t").await.unwrap();
    assert!(ctx.ports.store.config("linux").await.unwrap().unwrap().value.rollout.is_none(), "amount only");
    c.attributes.disk[0].image = "global/images/y".into();
    crate::operate::apply(&ctx, c.clone(), "t").await.unwrap();
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert!(rec.rollout.is_some() && rec.wants(2) && !rec.wants(3), "amount 2 plus a surge of 1");
    ctx.finished::<ExpandConfig>().await;
    expand(&ctx).await;
    assert_eq!(
        ctx.finished::<CreateInstance>().await,
        [CreateInstance { id: "linux-2".into() }],
        "the surge"
    );
    assert!(drained(&ctx, &["linux-0", "linux-1"]).await.is_empty(), "none goes before it connects");
    // The surge VM (new attributes) connects: one old VM may go.
    ctx.seed_vm("linux-2", |v| {
        up(ctx.now())(v);
        v.attributes = c.attributes_in("z");
    })
    .await;
    expand(&ctx).await;
    assert_eq!(drained(&ctx, &["linux-0", "linux-1"]).await, ["linux-0"]);
    let r = ctx.ports.store.config("linux").await.unwrap().unwrap().value.rollout.unwrap();
    assert_eq!((r.updated, r.outdated), (1, 2));
    expand(&ctx).await;
    assert_eq!(drained(&ctx, &["linux-1"]).await, Vec::<String>::new(), "one at a time");
    // The last old VM on its way out and the first one's replacement not connected yet: the
    // surge stays (its bot stands in for them).
    let v0 = ctx.ports.store.vm("linux-0").await.unwrap().unwrap();
    ctx.ports.store.delete_vm("linux-0", v0.version).await.unwrap();
    ctx.seed_vm("linux-0", |v| {
        created(ctx.now())(v);
        v.attributes = c.attributes_in("z");
    })
    .await;
    let v1 = ctx.ports.store.vm("linux-1").await.unwrap().unwrap().value;
    crate::fleet::lifecycle::drain(&ctx, &v1).await.unwrap();
    expand(&ctx).await;
    let r = ctx.ports.store.config("linux").await.unwrap().unwrap().value.rollout;
    assert_eq!(r.map(|r| (r.updated, r.outdated)), Some((2, 0)), "not done before new VMs serve the amount");
    // Old VMs all gone, two new ones up, but one of them is the surge: not done either.
    let v1 = ctx.ports.store.vm("linux-1").await.unwrap().unwrap();
    ctx.ports.store.delete_vm("linux-1", v1.version).await.unwrap();
    ctx.seed_vm("linux-1", |v| {
        created(ctx.now())(v);
        v.attributes = c.attributes_in("z");
    })
    .await;
    crate::records::writes::update_vm(&ctx, "linux-0", |v| {
        v.connected = Some(ctx.now());
        true
    })
    .await
    .unwrap();
    expand(&ctx).await;
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert!(rec.rollout.is_some(), "the surge serves for linux-1");
    // Both old VMs replaced by new ones: done, and the surge goes.
    for id in ["linux-0", "linux-1"] {
        let v = ctx.ports.store.vm(id).await.unwrap().unwrap();
        ctx.ports.store.delete_vm(id, v.version).await.unwrap();
        ctx.seed_vm(id, |v| {
            up(ctx.now())(v);
            v.attributes = c.attributes_in("z");
        })
        .await;
    }
    expand(&ctx).await;
    assert!(ctx.ports.store.config("linux").await.unwrap().unwrap().value.rollout.is_none());
    ctx.finished::<crate::work::DrainVm>().await;
    expand(&ctx).await;
    assert_eq!(ctx.finished::<crate::work::DrainVm>().await, [crate::work::DrainVm { id: "linux-2".into() }]);
}

#[tokio::test]
async fn a_rollout_with_nothing_to_replace_ends_at_its_first_step_and_makes_no_surge() {
    let (ctx, _) = Ctx::test();
    crate::operate::apply(&ctx, crate::testing::config("linux", 2), "t").await.unwrap();
    for id in ["linux-0", "linux-1"] {
        ctx.seed_vm(id, up(ctx.now())).await;
    }
    // Marked, but every VM has the Config's attributes (a change of zone weights marks so).
    let cur = ctx.ports.store.config("linux").await.unwrap().unwrap();
    let mark = Rollout { unknown: Default::default(), since: ctx.now(), updated: 0, outdated: 0 };
    let rec = ConfigRecord { rollout: Some(mark), ..cur.value };
    assert!(ctx.ports.store.put_config(&rec, Expect::Version(cur.version)).await.unwrap());
    let p = crate::operate::plan(&ctx, "linux", crate::model::PlanInput::default()).await.unwrap();
    assert_eq!(
        (p.keep.len(), p.replace.len(), p.create.len(), p.replacement),
        (2, 0, 0, None),
        "as planned:"
    );
    ctx.finished::<CreateInstance>().await;
    expand(&ctx).await;
    assert!(ctx.ports.store.config("linux").await.unwrap().unwrap().value.rollout.is_none());
    assert_eq!(ctx.finished::<CreateInstance>().await, [], "no surge VM");
}

#[test]
fn a_rollout_is_done_once_no_old_vm_is_left_and_new_ones_serve_the_amount() {
    let now = DateTime::<Utc>::UNIX_EPOCH;
    let vm = |index: u32, f: &dyn Fn(&mut Vm)| {
        let mut v = Vm { index, ..Vm::default() };
        f(&mut v);
        v
    };
    let serving = |v: &mut Vm| up(now)(v);
    let mut s = Standing::default();
    s.add(&vm(0, &serving), false, true);
    s.add(&vm(2, &serving), false, false); // the surge: does not count towards the amount
    assert_eq!((s.updated, s.updated_up), (2, 1));
    assert!(!s.done(2), "one new VM serves below the amount of 2");
    s.add(&vm(1, &serving), false, true);
    assert!(s.done(2));
    let mut old = s;
    old.add(&vm(3, &|v: &mut Vm| v.drained = true), true, false);
    assert_eq!(old.retiring, 1);
    assert!(!old.done(2), "an old VM still retiring");
    s.add(&vm(4, &|_: &mut Vm| {}), true, false);
    assert_eq!(s.outdated, 1);
    assert!(!s.done(2), "an old VM not yet drained");
}

#[tokio::test]
async fn a_vm_made_for_the_warm_pool_does_not_count_as_connected_for_a_rollout() {
    let (ctx, _) = Ctx::test();
    let mut c = crate::testing::config("linux", 2);
    // Two warm, less the surge's one while the rollout lasts: one VM made for the pool.
    c.warm = Some(crate::config::Warm { unknown: Default::default(), suspended: 2, stopped: 0 });
    crate::operate::apply(&ctx, c.clone(), "t").await.unwrap();
    for id in ["linux-0", "linux-1"] {
        ctx.seed_vm(id, up(ctx.now())).await;
    }
    c.attributes.disk[0].image = "global/images/y".into();
    crate::operate::apply(&ctx, c.clone(), "t").await.unwrap();
    expand(&ctx).await;
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert!(rec.wants(2) && rec.warm.iter().eq([3].iter()), "the surge, and a VM for the warm pool: {rec:?}");
    // Both new VMs connect; the warm pool's is not parked yet: only the surge stands in.
    for id in ["linux-2", "linux-3"] {
        ctx.seed_vm(id, |v| {
            up(ctx.now())(v);
            v.attributes = c.attributes_in("z");
        })
        .await;
    }
    expand(&ctx).await;
    assert_eq!(drained(&ctx, &["linux-0", "linux-1"]).await, ["linux-0"], "one at a time");
}
