//! The budget rule: a tenant's limit per hour, and how many new VMs it leaves a Config.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{TimeZone, Utc};

use super::*;
use crate::config::{SwarmingServers, Tenant, Trust, Usd};
use crate::ctx::Ctx;

fn tenant(max: Option<f64>, month: Option<f64>) -> Tenant {
    Tenant { max_cost_per_hour: max.map(Usd), budget_per_month: month.map(Usd), ..Tenant::open() }
}

#[test]
fn a_monthly_budget_is_what_is_left_of_it_over_the_hours_left_and_the_lower_limit_wins() {
    // 2026-11-21 10:00: 9 days and 14 hours (230 h) left in November.
    let now = Utc.with_ymd_and_hms(2026, 11, 21, 10, 0, 0).unwrap();
    let l = limit(&tenant(None, Some(1000.0)), 540.0, now).unwrap();
    assert!((l.per_hour.0 - 2.0).abs() < 1e-9, "{l:?}");
    assert!(l.by.starts_with("budget_per_month $1000 ($540 spent, 230 h left)"), "{l:?}");
    let both = limit(&tenant(Some(1.5), Some(1000.0)), 540.0, now).unwrap();
    assert_eq!((both.per_hour, both.by.as_str()), (Usd(1.5), "max_cost_per_hour $1.50"));
    let spent = limit(&tenant(Some(1.5), Some(1000.0)), 1200.0, now).unwrap();
    assert_eq!(spent.per_hour, Usd(0.0), "a budget spent leaves nothing: {spent:?}");
    assert_eq!(limit(&tenant(None, None), 0.0, now), None);
}

async fn limited(ctx: &mut Ctx, max: f64) {
    let tenants = BTreeMap::from([("*".to_owned(), tenant(Some(max), None))]);
    ctx.env.settings.trust = Arc::new(Trust::new(&SwarmingServers::default(), &tenants).unwrap());
}

#[tokio::test]
async fn a_tenants_limit_leaves_room_for_what_it_can_pay_counting_vms_being_made() {
    let (mut ctx, _) = Ctx::test();
    ctx.seed_config_with("linux", 10, |c| c.attributes.zone = "us-central1-b".into()).await;
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    let rates = ctx.catalog.rates(ctx.ports.store.as_ref(), ctx.now()).await.unwrap();
    let vm = per_hour(&rates, &rec, ctx.now()).unwrap();
    limited(&mut ctx, vm * 3.5).await;
    let h = hold(&*ctx.ports.store, &ctx.settings.trust, &rates, &rec, ctx.now()).await.unwrap().unwrap();
    assert_eq!((h.room, h.per_vm, h.cost_per_hour), (3, Some(Usd(vm)), Usd(0.0)), "{h:?}");
    assert!(h.said().starts_with("held by budget: tenant * costs $0.0000/h of its"), "{}", h.said());
    // Two VM records being made count at the Config's price.
    for i in 0..2 {
        ctx.seed_vm(&format!("linux-{i}"), |_| {}).await;
    }
    let h = hold(&*ctx.ports.store, &ctx.settings.trust, &rates, &rec, ctx.now()).await.unwrap().unwrap();
    assert_eq!(h.room, 1, "{h:?}");
    assert!((h.cost_per_hour.0 - 2.0 * vm).abs() < 1e-9);
}
