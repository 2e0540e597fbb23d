//! The showback report: months read strictly, a Config's and a tenant's months and cost now
//! from what the store's ledgers hold, deleted Configs marked, budgets used, a caller's view.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::config::{SwarmingServers, Tenant};
use crate::ctx::Ctx;
use crate::ports::store::Expect;
use crate::{model::ledger::Metered, model::ledger::spend};

fn oct(d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 10, d, h, 0, 0).unwrap()
}

fn nov(d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, d, h, 0, 0).unwrap()
}

fn meter(state: Billed, since: DateTime<Utc>, usd_per_hour: f64) -> Metered {
    Metered { state, since, rate: (usd_per_hour * 1e6) as u64, unknown: Default::default() }
}

/// Writes VM `id` through `meters` (each from its `since`; the last open unless `deleted_at`),
/// as the store applies a metered write: the ledger changes with each.
async fn metered(ctx: &Ctx, id: &str, meters: &[Metered], deleted_at: Option<DateTime<Utc>>) {
    let mut vm = ctx.seed_vm(id, |_| {}).await;
    let mut old: Option<&Metered> = None;
    for m in meters {
        let cur = ctx.ports.store.vm(id).await.unwrap().unwrap();
        vm.meter = Some(m.clone());
        assert!(
            ctx.ports
                .store
                .put_vm_spending(&vm, Expect::Version(cur.version), &spend(old, Some(m), m.since))
                .await
                .unwrap()
        );
        old = Some(m);
    }
    if let Some(end) = deleted_at {
        let cur = ctx.ports.store.vm(id).await.unwrap().unwrap();
        assert!(ctx.ports.store.delete_vm_spending(id, cur.version, &spend(old, None, end)).await.unwrap());
    }
}

fn tenants(budget: Option<f64>) -> Arc<Trust> {
    let team = Tenant {
        prefixes: vec!["team-a-*".into()],
        projects: vec!["*".into()],
        service_accounts: vec!["*".into()],
        budget_per_month: budget.map(Usd),
        max_cost_per_hour: Some(Usd(5.0)),
        ..Tenant::default()
    };
    let all = BTreeMap::from([("team-a".to_owned(), team), ("*".to_owned(), Tenant::open())]);
    Arc::new(Trust::new(&SwarmingServers::default(), &all).unwrap())
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn a_month_is_read_strictly_and_the_one_before_january_is_december() {
    let m = Month::parse("2026-11").unwrap();
    assert_eq!((m.to_string(), m.previous().to_string()), ("2026-11".into(), "2026-10".into()));
    assert_eq!(Month::parse("2027-01").unwrap().previous().to_string(), "2026-12");
    assert_eq!(Month::of(nov(21, 10)), m);
    for bad in [
        "2026-13",
        "2026-00",
        "2026-1",
        "26-11",
        "2026-11-01",
        " 2026-11",
        "2026-11 ",
        "2026/11",
        "+026-11",
        "2026-+1",
        "２０２６-11",
        "",
        "november",
    ] {
        let e = Month::parse(bad).unwrap_err();
        assert_eq!(e, Refused::Month(bad.into()), "{bad:?}");
        assert!(e.to_string().contains("YYYY-MM"), "{e}");
    }
}

#[test]
fn what_is_asked_is_checked_against_the_settings() {
    let trust = tenants(None);
    let now = nov(21, 10);
    let a = asked(&trust, now, None, None).unwrap();
    assert_eq!((a.month.to_string(), a.tenant), ("2026-11".into(), None));
    assert_eq!(
        asked(&trust, now, Some("2026-09"), Some("team-a")).unwrap().tenant.as_deref(),
        Some("team-a")
    );
    assert!(asked(&trust, now, None, Some("*")).is_ok(), "the open tenant is always there");
    assert_eq!(asked(&trust, now, None, Some("team-b")), Err(Refused::Tenant("team-b".into())));
    assert_eq!(asked(&trust, now, Some("2026-13"), Some("team-a")), Err(Refused::Month("2026-13".into())));
}

#[tokio::test]
async fn a_month_and_the_one_before_per_config_and_tenant_deleted_configs_included() {
    let (mut ctx, _) = Ctx::test(); // 2026-11-21 10:00
    ctx.env.settings.trust = tenants(Some(100.0));
    ctx.seed_config("linux", 1).await;
    // linux-0: running at $1/h from Oct 31 22:00 (2 h in October), suspended at $0.10/h from
    // Nov 1 02:00 (2 h running in November), still now (488 h suspended).
    let run = meter(Billed::Running, oct(31, 22), 1.0);
    let sus = meter(Billed::Suspended, nov(1, 2), 0.1);
    metered(&ctx, "linux-0", &[run, sus], None).await;
    // team-a-old: deleted since; its VM ran 10 h in October at $2/h.
    metered(&ctx, "team-a-old-0", &[meter(Billed::Running, oct(15, 0), 2.0)], Some(oct(15, 10))).await;

    let r = report(&*ctx.ports.store, &ctx.settings.trust, ctx.now(), None, None).await.unwrap();
    assert_eq!((r.month.as_str(), r.previous_month.as_str(), r.at), ("2026-11", "2026-10", ctx.now()));
    assert!(r.prices.source.starts_with("snapshot "), "{:?}", r.prices);
    let names: Vec<&str> = r.tenants.iter().map(|t| t.tenant.as_str()).collect();
    assert_eq!(names, ["*", "team-a"]);

    let open = &r.tenants[0];
    let linux = &open.configs[0];
    assert_eq!((linux.prefix.as_str(), linux.tenant.as_str(), linux.deleted), ("linux", "*", false));
    assert!(near(linux.cost_per_hour.0, 0.1), "{linux:?}");
    assert!(near(linux.month.hours.running, 2.0) && near(linux.month.hours.suspended, 488.0), "{linux:?}");
    assert!(near(linux.month.usd_by_state.running, 2.0) && near(linux.month.usd.0, 50.8), "{linux:?}");
    assert_eq!(linux.month.hours.stopped, 0.0);
    assert_eq!(linux.previous.month, "2026-10");
    assert!(near(linux.previous.hours.running, 2.0) && near(linux.previous.usd.0, 2.0), "{linux:?}");
    assert_eq!((open.budget_per_month, open.budget_used_percent), (None, None), "the open tenant sets none");

    let team = &r.tenants[1];
    let old = &team.configs[0];
    assert_eq!((old.prefix.as_str(), old.deleted, old.cost_per_hour), ("team-a-old", true, Usd(0.0)));
    assert!(near(old.previous.hours.running, 10.0) && near(old.previous.usd.0, 20.0), "{old:?}");
    assert_eq!(old.month.usd, Usd(0.0));
    assert_eq!((team.budget_per_month, team.max_cost_per_hour), (Some(Usd(100.0)), Some(Usd(5.0))));
    assert_eq!(team.budget_used_percent, Some(0.0), "nothing spent in November");

    // October asked: the tenant's sums, and the share of its budget that month.
    let r = report(&*ctx.ports.store, &ctx.settings.trust, ctx.now(), Some("2026-10"), Some("team-a"))
        .await
        .unwrap();
    assert_eq!((r.month.as_str(), r.previous_month.as_str()), ("2026-10", "2026-09"));
    assert_eq!(r.tenants.len(), 1);
    let team = &r.tenants[0];
    assert!(near(team.month.usd.0, 20.0) && near(team.month.hours.running, 10.0), "{team:?}");
    assert_eq!(team.previous.usd, Usd(0.0));
    assert!(near(team.budget_used_percent.unwrap(), 20.0), "{team:?}");
    // The open tenant's sums are its Configs' sums.
    let r = report(&*ctx.ports.store, &ctx.settings.trust, ctx.now(), None, Some("*")).await.unwrap();
    let open = &r.tenants[0];
    assert!(near(open.month.usd.0, 50.8) && near(open.cost_per_hour.0, 0.1), "{open:?}");
}

#[tokio::test]
async fn a_bad_month_or_an_unknown_tenant_is_refused_saying_why() {
    let (ctx, _) = Ctx::test();
    for (month, tenant, says) in [
        (Some("2026-13"), None, "month \"2026-13\" is not a month"),
        (Some("2026-1"), None, "YYYY-MM"),
        (None, Some("nobody"), "no tenant \"nobody\""),
    ] {
        match report(&*ctx.ports.store, &ctx.settings.trust, ctx.now(), month, tenant).await {
            Err(TaskError::Invalid(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("{month:?} {tenant:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_tenant_asked_by_name_is_there_without_configs_and_a_caller_sees_what_it_may() {
    let (mut ctx, _) = Ctx::test();
    ctx.env.settings.trust = tenants(Some(50.0));
    let r = report(&*ctx.ports.store, &ctx.settings.trust, ctx.now(), None, Some("team-a")).await.unwrap();
    assert_eq!(r.tenants.len(), 1);
    assert_eq!((r.tenants[0].budget_used_percent, r.tenants[0].configs.len()), (Some(0.0), 0));

    ctx.seed_config("linux", 1).await;
    ctx.seed_config("mac", 1).await;
    metered(&ctx, "linux-0", &[meter(Billed::Running, nov(21, 0), 1.0)], None).await;
    metered(&ctx, "mac-0", &[meter(Billed::Stopped, nov(21, 6), 0.01)], None).await;
    let mut r = report(&*ctx.ports.store, &ctx.settings.trust, ctx.now(), None, None).await.unwrap();
    r.retain(|c| c.prefix == "mac", |_| false);
    assert_eq!(r.tenants.len(), 1, "team-a has no Config this caller may read: {r:?}");
    let open = &r.tenants[0];
    assert_eq!(open.configs.iter().map(|c| c.prefix.as_str()).collect::<Vec<_>>(), ["mac"]);
    assert_eq!(open.hidden, 1);
    assert!(near(open.configs[0].month.hours.stopped, 4.0), "{open:?}");
    assert!(near(open.month.usd.0, 10.04), "the tenant's sums are its budget's, over every Config: {open:?}");
}

#[tokio::test]
async fn a_tenant_with_a_budget_is_listed_before_it_has_a_config_and_one_without_is_not() {
    let (mut ctx, _) = Ctx::test();
    ctx.env.settings.trust = tenants(Some(50.0));
    let r = report(&*ctx.ports.store, &ctx.settings.trust, ctx.now(), None, None).await.unwrap();
    let names: Vec<&str> = r.tenants.iter().map(|t| t.tenant.as_str()).collect();
    assert_eq!(names, ["team-a"], "the open tenant sets no budget and has no Config: {r:?}");
    assert_eq!(r.tenants[0].budget_per_month, Some(Usd(50.0)));
}
