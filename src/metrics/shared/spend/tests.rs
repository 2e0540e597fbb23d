//! The cost families as a scrape shows them: every Config's series from the start (a deleted
//! Config's kept), dollars ever by state, the cost per hour now, and each tenant's month with
//! its budget only where it sets one.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use gce_backend_jobs::config::{SwarmingServers, Tenant, Trust, Usd};
use gce_backend_jobs::ports::store::Expect;
use gce_backend_jobs::{model::ledger::Billed, model::ledger::Metered, model::ledger::spend};
use prometheus_client::collector::Collector;
use prometheus_client::registry::Registry;

use super::*;

/// Encodes `costs` as `/metrics` does, under the service's prefix.
#[derive(Debug)]
struct Only(Costs);

impl Collector for Only {
    fn encode(&self, mut d: DescriptorEncoder<'_>) -> std::fmt::Result {
        encode(&mut d, &self.0)
    }
}

fn scrape(costs: Costs) -> Vec<String> {
    let mut r = Registry::with_prefix("gce_backend");
    r.register_collector(Box::new(Only(costs)));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
    text.lines().filter(|l| !l.starts_with('#')).map(str::to_owned).collect()
}

#[tokio::test]
async fn every_config_has_its_series_from_the_start_and_tenants_their_month_and_budget() {
    let (mut ctx, _) = gce_backend_jobs::Ctx::test(); // 2026-11-21 10:00
    let team = Tenant {
        prefixes: vec!["team-*".into()],
        projects: vec!["*".into()],
        service_accounts: vec!["*".into()],
        budget_per_month: Some(Usd(100.0)),
        ..Tenant::default()
    };
    let all = BTreeMap::from([("team".to_owned(), team), ("*".to_owned(), Tenant::open())]);
    ctx.env.settings.trust = Arc::new(Trust::new(&SwarmingServers::default(), &all).unwrap());
    // linux: a Config that has spent nothing yet. team-old: deleted, its VM ran 3 h at $2/h in
    // October and 1 h stopped at $0.5/h this month, still stopped.
    ctx.seed_config("linux", 1).await;
    let mut vm = ctx.seed_vm("team-old-0", |_| {}).await;
    let ran = Metered {
        state: Billed::Running,
        since: Utc.with_ymd_and_hms(2026, 10, 5, 0, 0, 0).unwrap(),
        rate: 2_000_000,
        unknown: Default::default(),
    };
    let stopped = Metered {
        state: Billed::Stopped,
        since: ctx.now() - Duration::hours(1),
        rate: 500_000,
        ..ran.clone()
    };
    for (old, new, at) in [(None, &ran, ran.since), (Some(&ran), &stopped, ran.since + Duration::hours(3))] {
        let v = ctx.ports.store.vm("team-old-0").await.unwrap().unwrap().version;
        vm.meter = Some(new.clone());
        assert!(
            ctx.ports
                .store
                .put_vm_spending(&vm, Expect::Version(v), &spend(old, Some(new), at))
                .await
                .unwrap()
        );
    }

    let lines = scrape(read(&ctx).await.unwrap());
    let want = [
        r#"gce_backend_fleet_cost_dollars_total{config="linux",tenant="*",state="running"} 0.0"#,
        r#"gce_backend_fleet_cost_dollars_total{config="linux",tenant="*",state="suspended"} 0.0"#,
        r#"gce_backend_fleet_cost_dollars_total{config="linux",tenant="*",state="stopped"} 0.0"#,
        r#"gce_backend_fleet_cost_dollars_total{config="team-old",tenant="team",state="running"} 6.0"#,
        r#"gce_backend_fleet_cost_dollars_total{config="team-old",tenant="team",state="suspended"} 0.0"#,
        r#"gce_backend_fleet_cost_dollars_total{config="team-old",tenant="team",state="stopped"} 0.5"#,
        r#"gce_backend_fleet_cost_rate_dollars_per_hour{config="linux",tenant="*"} 0.0"#,
        r#"gce_backend_fleet_cost_rate_dollars_per_hour{config="team-old",tenant="team"} 0.5"#,
        r#"gce_backend_fleet_tenant_spend_month_dollars{tenant="*"} 0.0"#,
        r#"gce_backend_fleet_tenant_spend_month_dollars{tenant="team"} 0.5"#,
        r#"gce_backend_fleet_tenant_budget_month_dollars{tenant="team"} 100.0"#,
    ];
    assert_eq!(lines.iter().map(String::as_str).collect::<Vec<_>>(), want, "\n{}", lines.join("\n"));
}
