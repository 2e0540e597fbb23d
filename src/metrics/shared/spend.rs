//! What the fleet costs, read from the Configs' ledgers at each scrape (part of the shared state):
//! per Config, the dollars spent ever by billed state and the cost per hour now, every Config's
//! series there from the start, at zero (a deleted Config's kept); per tenant, this month's
//! spend (as the showback report sums it) and its monthly budget, if it sets one.

use gce_backend_jobs::Ctx;
use gce_backend_jobs::error::TaskError;
use gce_backend_jobs::{
    spend::report::Asked, spend::report::Month, spend::report::SpendByState, spend::report::tenants,
    spend::report::total_usd,
};
use gce_backend_queues::metrics::Labels;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// One Config's cost.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ConfigCost {
    pub(super) prefix: String,
    pub(super) tenant: String,
    /// USD spent ever, by billed state.
    pub(super) total: SpendByState,
    /// USD per hour now.
    pub(super) per_hour: f64,
}

/// One tenant's month.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TenantMonth {
    pub(super) tenant: String,
    /// USD spent this month.
    pub(super) spent: f64,
    /// Its `budget_per_month`.
    pub(super) budget: Option<f64>,
}

/// The fleet's cost as last read.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Costs {
    pub(super) configs: Vec<ConfigCost>,
    pub(super) tenants: Vec<TenantMonth>,
}

/// The fleet's cost now: every Config's ledger read once.
pub(super) async fn read(ctx: &Ctx) -> Result<Costs, TaskError> {
    let now = ctx.now();
    let all = gce_backend_jobs::spend::ledgers(&*ctx.ports.store, &ctx.settings.trust, now).await?;
    let configs = all
        .iter()
        .map(|c| ConfigCost {
            prefix: c.prefix.clone(),
            tenant: c.tenant.clone(),
            total: total_usd(&c.ledger),
            per_hour: c.ledger.per_hour(),
        })
        .collect();
    let asked = Asked { month: Month::of(now), tenant: None };
    let tenants = tenants(&all, &ctx.settings.trust, &asked)
        .into_iter()
        .map(|t| TenantMonth {
            tenant: t.tenant,
            spent: t.month.usd.0,
            budget: t.budget_per_month.map(|b| b.0),
        })
        .collect();
    Ok(Costs { configs, tenants })
}

fn family<M: EncodeMetric>(
    d: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    rows: impl IntoIterator<Item = (Labels, M)>,
) -> std::fmt::Result {
    let mut m = d.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in rows {
        v.encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn labels(pairs: &[(&'static str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

/// Encodes `c`'s four families.
pub(super) fn encode(d: &mut DescriptorEncoder<'_>, c: &Costs) -> std::fmt::Result {
    let spent = c.configs.iter().flat_map(|k| {
        let by =
            [("running", k.total.running), ("suspended", k.total.suspended), ("stopped", k.total.stopped)];
        by.map(|(state, v)| {
            (labels(&[("config", &k.prefix), ("tenant", &k.tenant), ("state", state)]), ConstCounter::new(v))
        })
    });
    family(
        d,
        "fleet_cost_dollars",
        "USD a Config's VMs have cost, ever, by billed state (running, suspended, stopped; disks included), at list prices, from its ledger (a deleted Config's kept)",
        MetricType::Counter,
        spent,
    )?;
    let rate = c
        .configs
        .iter()
        .map(|k| (labels(&[("config", &k.prefix), ("tenant", &k.tenant)]), ConstGauge::new(k.per_hour)));
    family(
        d,
        "fleet_cost_rate_dollars_per_hour",
        "USD per hour a Config's VMs cost now, as billed",
        MetricType::Gauge,
        rate,
    )?;
    let month = c.tenants.iter().map(|t| (labels(&[("tenant", &t.tenant)]), ConstGauge::new(t.spent)));
    family(
        d,
        "fleet_tenant_spend_month_dollars",
        "USD a tenant's Configs spent this calendar month (UTC), deleted ones included",
        MetricType::Gauge,
        month,
    )?;
    let budget =
        c.tenants.iter().filter_map(|t| Some((labels(&[("tenant", &t.tenant)]), ConstGauge::new(t.budget?))));
    family(
        d,
        "fleet_tenant_budget_month_dollars",
        "A tenant's budget_per_month in USD (tenants that set one)",
        MetricType::Gauge,
        budget,
    )
}

#[cfg(test)]
mod tests;
