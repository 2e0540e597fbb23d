//! Showback: what each tenant and each of its Configs (deleted ones included) spent in a month
//! and the month before it, VM-hours and dollars by billed state, what it costs per hour now,
//! and how much of its monthly budget it has used, at the prices of the book in force. Decided
//! here, once: the API answers it, the CLI and the dashboard print it, `/metrics` exports its
//! tenants' sums.
//!
//! Each VM's interval is priced at the rate of the book in force when it began (its meter); the
//! report names the book in force now (its source and date).

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};

use super::{ConfigLedger, ledgers};
use crate::config::trust::OPEN_TENANT;
use crate::config::{Trust, Usd};
use crate::error::TaskError;
use crate::ports::store::Store;
use crate::{model::ledger::Accrued, model::ledger::Billed, model::ledger::Ledger};

/// A calendar month (UTC), as `YYYY-MM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Month {
    year: i32,
    month: u32,
}

/// Why a showback cannot be made as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The month is not `YYYY-MM`.
    #[error("month {0:?} is not a month: YYYY-MM, from 01 to 12 (e.g. 2026-11)")]
    Month(String),
    /// No tenant of that name in the settings.
    #[error("no tenant {0:?} in the settings ([tenants.<group>])")]
    Tenant(String),
}

impl Month {
    /// Reads `YYYY-MM` strictly: four ASCII digits, `-`, two ASCII digits from 01 to 12; no
    /// space, sign, day or other separator.
    pub fn parse(s: &str) -> Result<Month, Refused> {
        let refused = || Refused::Month(s.chars().take(40).collect());
        let b = s.as_bytes();
        let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
        if b.len() != 7 || b[4] != b'-' || !digits(0..4) || !digits(5..7) {
            return Err(refused());
        }
        let (year, month) = (s[..4].parse().map_err(|_| refused())?, s[5..].parse().map_err(|_| refused())?);
        if !(1..=12).contains(&month) {
            return Err(refused());
        }
        Ok(Month { year, month })
    }

    /// The month `at` is in.
    pub fn of(at: DateTime<Utc>) -> Month {
        Month { year: at.year(), month: at.month() }
    }

    /// The month before it.
    pub fn previous(self) -> Month {
        match self.month {
            1 => Month { year: self.year - 1, month: 12 },
            m => Month { year: self.year, month: m - 1 },
        }
    }
}

impl std::fmt::Display for Month {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

/// What a showback is asked for, checked: a month, and a tenant or every one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// The month.
    pub month: Month,
    /// One tenant, or every one.
    pub tenant: Option<String>,
}

/// Checks what is asked at `now`: `month` as `YYYY-MM` (none: `now`'s), `tenant` one of the
/// settings' (or the open tenant `*`, which holds the Configs of no other).
pub fn asked(
    trust: &Trust,
    now: DateTime<Utc>,
    month: Option<&str>,
    tenant: Option<&str>,
) -> Result<Asked, Refused> {
    let month = match month {
        Some(m) => Month::parse(m)?,
        None => Month::of(now),
    };
    if let Some(t) = tenant
        && t != OPEN_TENANT
        && trust.tenant(t).is_none()
    {
        return Err(Refused::Tenant(t.chars().take(130).collect()));
    }
    Ok(Asked { month, tenant: tenant.map(str::to_owned) })
}

/// Amounts per billed state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpendByState {
    /// Running (its machine type and disks).
    pub running: f64,
    /// Suspended (its saved memory and disks).
    pub suspended: f64,
    /// Stopped (its disks).
    pub stopped: f64,
}

impl SpendByState {
    fn add(&mut self, state: Billed, v: f64) {
        match state {
            Billed::Running => self.running += v,
            Billed::Suspended => self.suspended += v,
            Billed::Stopped => self.stopped += v,
        }
    }

    /// The sum over the states.
    pub fn total(&self) -> f64 {
        self.running + self.suspended + self.stopped
    }
}

/// What was spent in one month.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MonthSpend {
    /// The month, `YYYY-MM` (UTC).
    pub month: String,
    /// VM-hours by billed state.
    pub hours: SpendByState,
    /// USD by billed state.
    pub usd_by_state: SpendByState,
    /// USD in all.
    pub usd: Usd,
}

impl MonthSpend {
    fn of(month: Month, accrued: &BTreeMap<Billed, Accrued>) -> MonthSpend {
        let mut out = MonthSpend { month: month.to_string(), ..MonthSpend::default() };
        for (b, a) in accrued {
            out.hours.add(*b, a.hours);
            out.usd_by_state.add(*b, a.usd);
        }
        out.usd = Usd(out.usd_by_state.total());
        out
    }

    fn merge(&mut self, o: &MonthSpend) {
        for (mine, theirs) in [(&mut self.hours, &o.hours), (&mut self.usd_by_state, &o.usd_by_state)] {
            mine.running += theirs.running;
            mine.suspended += theirs.suspended;
            mine.stopped += theirs.stopped;
        }
        self.usd = Usd(self.usd_by_state.total());
    }
}

/// One Config's spend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfigSpend {
    /// Its prefix.
    pub prefix: String,
    /// Its tenant (a deleted Config's: the one whose namespace holds its prefix).
    pub tenant: String,
    /// True once the Config is deleted: what its VMs spent is kept.
    #[serde(default)]
    pub deleted: bool,
    /// USD per hour its VMs cost now, as billed (running, suspended, stopped; disks included).
    pub cost_per_hour: Usd,
    /// The month asked.
    pub month: MonthSpend,
    /// The month before it.
    pub previous: MonthSpend,
}

/// One tenant's spend: its sums are over all its Configs (what its budget counts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TenantSpend {
    /// The tenant (an owner group, or `*`: the Configs of no other tenant).
    pub tenant: String,
    /// Its `budget_per_month`, if it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_per_month: Option<Usd>,
    /// Its `max_cost_per_hour`, if it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_per_hour: Option<Usd>,
    /// The share of `budget_per_month` its Configs spent in the month asked, in percent (over
    /// 100 when past it); absent without a budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_used_percent: Option<f64>,
    /// USD per hour its Configs cost now, as billed.
    pub cost_per_hour: Usd,
    /// The month asked, over its Configs.
    pub month: MonthSpend,
    /// The month before it, over its Configs.
    pub previous: MonthSpend,
    /// Its Configs the caller may read, by prefix.
    pub configs: Vec<ConfigSpend>,
    /// How many of its Configs the caller may not read: counted in its sums, not listed.
    #[serde(default)]
    pub hidden: u32,
}

/// The price book the costs come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpendPrices {
    /// Where its prices come from: `catalog` (the Cloud Billing Catalog API) or
    /// `snapshot <date>` (the dated snapshot in `config/prices/`).
    pub source: String,
    /// When they were read (a snapshot's: its date): the price date.
    pub read_at: DateTime<Utc>,
}

/// The showback report: per tenant and per Config, the month asked and the one before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpendReport {
    /// The month asked, `YYYY-MM` (UTC).
    pub month: String,
    /// The month before it.
    pub previous_month: String,
    /// When it was read (the current month's spend is to this instant).
    pub at: DateTime<Utc>,
    /// The price book in force (each VM's interval is priced at the book in force when it
    /// began).
    pub prices: SpendPrices,
    /// The tenants with a Config (or asked by name), by name.
    pub tenants: Vec<TenantSpend>,
}

impl SpendReport {
    /// Keeps the Configs `keep` says the caller may read (the others stay in their tenant's
    /// sums, counted as `hidden`), and the tenants that still list one or that `tenant_kept` says
    /// the caller may read.
    pub fn retain(&mut self, keep: impl Fn(&ConfigSpend) -> bool, tenant_kept: impl Fn(&str) -> bool) {
        for t in &mut self.tenants {
            let before = t.configs.len();
            t.configs.retain(&keep);
            t.hidden += (before - t.configs.len()) as u32;
        }
        self.tenants.retain(|t| !t.configs.is_empty() || tenant_kept(&t.tenant));
    }
}

fn config_spend(c: &ConfigLedger, asked: &Asked) -> ConfigSpend {
    let month = |m: Month| MonthSpend::of(m, &c.ledger.month(&m.to_string()));
    ConfigSpend {
        prefix: c.prefix.clone(),
        tenant: c.tenant.clone(),
        deleted: c.record.is_none(),
        cost_per_hour: Usd(c.ledger.per_hour()),
        month: month(asked.month),
        previous: month(asked.month.previous()),
    }
}

/// The tenants of `all` (every Config's ledger, read now) as `asked`, by name, each with its
/// Configs (every one: [`SpendReport::retain`] cuts a caller's view).
pub fn tenants(all: &[ConfigLedger], trust: &Trust, asked: &Asked) -> Vec<TenantSpend> {
    let mut tenants: BTreeMap<String, TenantSpend> = BTreeMap::new();
    let empty = |name: &str| {
        let t = trust.tenant(name);
        TenantSpend {
            tenant: name.to_owned(),
            budget_per_month: t.and_then(|t| t.budget_per_month),
            max_cost_per_hour: t.and_then(|t| t.max_cost_per_hour),
            budget_used_percent: None,
            cost_per_hour: Usd(0.0),
            month: MonthSpend { month: asked.month.to_string(), ..MonthSpend::default() },
            previous: MonthSpend { month: asked.month.previous().to_string(), ..MonthSpend::default() },
            configs: Vec::new(),
            hidden: 0,
        }
    };
    match &asked.tenant {
        Some(t) => {
            tenants.insert(t.clone(), empty(t));
        }
        // A tenant with a budget is listed with or without Configs (its budget series too).
        None => {
            for (name, t) in trust.tenants() {
                if t.budget_per_month.is_some() || t.max_cost_per_hour.is_some() {
                    tenants.insert(name.to_owned(), empty(name));
                }
            }
        }
    }
    for c in all.iter().filter(|c| asked.tenant.as_ref().is_none_or(|t| *t == c.tenant)) {
        let spend = config_spend(c, asked);
        let t = tenants.entry(c.tenant.clone()).or_insert_with(|| empty(&c.tenant));
        t.cost_per_hour = Usd(t.cost_per_hour.0 + spend.cost_per_hour.0);
        t.month.merge(&spend.month);
        t.previous.merge(&spend.previous);
        t.configs.push(spend);
    }
    for t in tenants.values_mut() {
        t.configs.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        t.budget_used_percent = t.budget_per_month.map(|b| 100.0 * t.month.usd.0 / b.0);
    }
    tenants.into_values().collect()
}

/// The report of `all` (every Config's ledger, read at `now`) as `asked`, at `prices`.
pub fn build(
    all: &[ConfigLedger],
    trust: &Trust,
    prices: SpendPrices,
    now: DateTime<Utc>,
    asked: &Asked,
) -> SpendReport {
    SpendReport {
        month: asked.month.to_string(),
        previous_month: asked.month.previous().to_string(),
        at: now,
        prices,
        tenants: tenants(all, trust, asked),
    }
}

/// The price book in force, as the report names it.
pub async fn prices(store: &dyn Store) -> Result<SpendPrices, TaskError> {
    let book = crate::catalog::price_book(store).await?;
    Ok(SpendPrices { source: book.source, read_at: book.read_at })
}

/// The report as `asked`, read from `store` at `now`.
pub async fn of(
    store: &dyn Store,
    trust: &Trust,
    now: DateTime<Utc>,
    asked: &Asked,
) -> Result<SpendReport, TaskError> {
    let all = ledgers(store, trust, now).await?;
    Ok(build(&all, trust, prices(store).await?, now, asked))
}

/// The showback report at `now`: per tenant (`tenant`, or every one) and per Config, deleted
/// Configs included and marked, VM-hours by state and cost in `month` (`YYYY-MM`, none: this
/// month) and the month before it, the cost per hour now, the tenant's budget and the share of
/// it used, and the price book's source and date. A month not `YYYY-MM`, or a tenant the settings
/// do not name, is refused ([`TaskError::Invalid`], saying why).
pub async fn report(
    store: &dyn Store,
    trust: &Trust,
    now: DateTime<Utc>,
    month: Option<&str>,
    tenant: Option<&str>,
) -> Result<SpendReport, TaskError> {
    let asked = asked(trust, now, month, tenant).map_err(|e| TaskError::Invalid(e.to_string()))?;
    of(store, trust, now, &asked).await
}

/// Everything `ledger` accrued, per state, in USD: what `/metrics` counts.
pub fn total_usd(ledger: &Ledger) -> SpendByState {
    let mut out = SpendByState::default();
    for (b, a) in ledger.total() {
        out.add(b, a.usd);
    }
    out
}

#[cfg(test)]
mod tests;
