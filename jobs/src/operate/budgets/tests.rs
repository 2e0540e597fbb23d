//! Budgets' changes recorded once each in the audit trail.

use std::collections::BTreeMap;

use super::*;
use crate::config::{SwarmingServers, Usd};
use crate::ctx::Ctx;

fn trust(month: Option<f64>, hour: Option<f64>) -> Trust {
    let t = Tenant { budget_per_month: month.map(Usd), max_cost_per_hour: hour.map(Usd), ..Tenant::open() };
    Trust::new(&SwarmingServers::default(), &BTreeMap::from([("team-a".to_owned(), t)])).unwrap()
}

async fn said(ctx: &Ctx) -> Vec<String> {
    let all = ctx.ports.store.audit(GLOBAL_AUDIT, 0, 100).await.unwrap();
    all.into_iter()
        .filter(|e| e.action == AuditAction::Budget && e.actor == SETTINGS)
        .map(|e| e.detail)
        .collect()
}

#[tokio::test]
async fn each_change_of_a_budget_is_recorded_once_and_none_is_recorded_for_a_tenant_without_one() {
    let (ctx, _) = Ctx::test();
    assert_eq!(record_changes(&ctx, &trust(None, None)).await.unwrap(), 0);
    assert!(said(&ctx).await.is_empty());
    assert_eq!(record_changes(&ctx, &trust(Some(1000.0), None)).await.unwrap(), 1);
    // Started again with the same settings (or by a second process): nothing more.
    assert_eq!(record_changes(&ctx, &trust(Some(1000.0), None)).await.unwrap(), 0);
    assert_eq!(record_changes(&ctx, &trust(Some(1000.0), Some(2.5))).await.unwrap(), 1);
    assert_eq!(record_changes(&ctx, &trust(None, None)).await.unwrap(), 1);
    assert_eq!(
        said(&ctx).await,
        [
            "tenant team-a: budget_per_month none, max_cost_per_hour none (was budget_per_month $1000, max_cost_per_hour $2.50)",
            "tenant team-a: budget_per_month $1000, max_cost_per_hour $2.50 (was budget_per_month $1000, max_cost_per_hour none)",
            "tenant team-a: budget_per_month $1000, max_cost_per_hour none (was none recorded)",
        ]
    );
}
