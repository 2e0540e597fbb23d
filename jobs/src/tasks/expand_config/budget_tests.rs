//! A tenant's budget holds a Config's growth at its limit, cuts nothing, and lets it grow again
//! once the limit rises.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{SwarmingServers, Tenant, Trust, Usd};
use crate::testing::created;
use crate::work::DrainVm;

use super::*;

fn limited(ctx: &mut Ctx, max: f64) {
    let t = Tenant { max_cost_per_hour: Some(Usd(max)), ..Tenant::open() };
    let tenants = BTreeMap::from([("*".to_owned(), t)]);
    ctx.env.settings.trust = Arc::new(Trust::new(&SwarmingServers::default(), &tenants).unwrap());
}

async fn vms(ctx: &Ctx) -> Vec<String> {
    ctx.ports.store.vm_ids(VmIndex::OfConfig("linux".into())).await.unwrap()
}

#[tokio::test]
async fn growth_is_held_at_the_tenants_limit_nothing_is_cut_and_it_grows_when_the_limit_rises() {
    let (mut ctx, _) = Ctx::test();
    ctx.seed_config_with("linux", 6, |c| c.attributes.zone = "us-central1-b".into()).await;
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    let rates = ctx.catalog.rates(ctx.ports.store.as_ref(), ctx.now()).await.unwrap();
    let vm = crate::spend::per_hour(&rates, &rec, ctx.now()).unwrap();
    limited(&mut ctx, vm * 2.5);
    let expand = ExpandConfig { prefix: "linux".into() };
    run(&ctx, expand.clone()).await.unwrap();
    assert_eq!(vms(&ctx).await.len(), 2, "two VMs fit under $2.5 VMs an hour");
    // Their instances are made and they run: billed now, still two, and the hold is said once.
    let now = ctx.now();
    for id in vms(&ctx).await {
        crate::records::writes::update_vm(&ctx, &id, |v| {
            created(now)(v);
            true
        })
        .await
        .unwrap();
    }
    for _ in 0..3 {
        run(&ctx, expand.clone()).await.unwrap();
    }
    assert_eq!(vms(&ctx).await.len(), 2);
    let errors = ctx.ports.store.errors("linux").await.unwrap();
    let held: Vec<_> = errors.iter().filter(|e| e.stage == "budget" && e.resolved.is_none()).collect();
    assert_eq!(held.len(), 1, "{errors:?}");
    assert!(held[0].message.contains("max_cost_per_hour"), "{}", held[0].message);
    let report =
        crate::fleet::status::report(&*ctx.ports.store, &*ctx.ports.buckets, &[], ctx.now(), chrono::Duration::zero(), true, &ctx.settings.trust)
            .await
            .unwrap();
    let st = &report.configs[0];
    let hold = st.budget.as_ref().expect("status shows the hold");
    assert_eq!(hold.room, 0, "{hold:?}");
    assert!((hold.cost_per_hour.0 - 2.0 * vm).abs() < 1e-6, "{hold:?}");
    assert!((st.cost_per_hour.unwrap().0 - 2.0 * vm).abs() < 1e-6, "{st:?}");
    assert!(ctx.taken::<DrainVm>().await.is_empty(), "what runs is never cut");
    // The limit rises: the pool grows to its amount, and the hold is resolved.
    limited(&mut ctx, vm * 10.0);
    run(&ctx, expand.clone()).await.unwrap();
    assert_eq!(vms(&ctx).await.len(), 6);
    let errors = ctx.ports.store.errors("linux").await.unwrap();
    assert!(errors.iter().filter(|e| e.stage == "budget").all(|e| e.resolved.is_some()), "{errors:?}");
}
