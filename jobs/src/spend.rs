//! What each Config and tenant has spent and costs now, read from the ledgers the VM writes keep
//! (`model::spend`), and the one budget rule: how many new VMs a tenant's `budget_per_month` and
//! `max_cost_per_hour` let a Config make. Growth past a limit is held there; what runs is never
//! cut.
//!
//! A tenant's cost per hour counts its VMs as billed now and, at their Config's price, the VMs
//! being made (records without an instance), so growth in flight is not made twice. A monthly
//! budget acts as a limit per hour: what is left of it spread over the hours left in the month.

pub mod report;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use crate::config::{Tenant, Trust, Usd, region_of};
use crate::error::TaskError;
use crate::model::{ConfigRecord, ConfigStatus};
use crate::ports::store::Store;
use crate::{
    model::ledger::Hold, model::ledger::Ledger, model::ledger::Limit, model::ledger::ledger,
    model::ledger::month_of, model::ledger::next_month,
};
use crate::{prices::Rates, prices::Unpriced};

/// USD per hour of one running VM `rec` makes now: its machine type (the dearest of its ranks:
/// a fallback may be made) in its region (its first zone's), Spot or standard as its new VMs
/// are (a Spot failover in force makes them standard), plus its disks.
pub fn per_hour(rates: &Rates, rec: &ConfigRecord, now: DateTime<Utc>) -> Result<f64, Unpriced> {
    let c = &rec.config;
    if c.is_static() {
        return Err(Unpriced("a static pool: its machines are not made by this service".into()));
    }
    let zone = c.zones.first().map_or(c.attributes.zone.as_str(), |z| z.zone.as_str());
    let region = if zone.is_empty() { c.region.as_str() } else { region_of(zone) };
    if region.is_empty() {
        return Err(Unpriced("no zone or region".into()));
    }
    let ranks = 1 + c.fallback_machine_types.len() as u32;
    let mut dearest: Option<f64> = None;
    for rank in 0..ranks {
        let (a, _) = rec.new_vm_attributes(zone, (ranks > 1).then_some(rank), now);
        if a.machine_type.is_empty() {
            return Err(Unpriced("no machine type".into()));
        }
        let mut total = rates.machine_per_hour(&a.machine_type, region, a.preemptible())?;
        for (i, d) in a.disk.iter().enumerate() {
            if d.size == 0 {
                return Err(Unpriced(format!("disk {i} has no size (its image's, not known here)")));
            }
            total += rates.disk_per_hour(&d.kind, d.size as f64, region)?;
        }
        dearest = Some(dearest.map_or(total, |d: f64| d.max(total)));
    }
    dearest.ok_or_else(|| Unpriced("no machine type".into()))
}

/// One Config's ledger read now, with its tenant.
#[derive(Debug, Clone)]
pub struct ConfigLedger {
    /// Its prefix.
    pub prefix: String,
    /// Its tenant (a deleted Config's: the one whose namespace holds its prefix).
    pub tenant: String,
    /// Its record, unless deleted.
    pub record: Option<ConfigRecord>,
    /// Its ledger, read now.
    pub ledger: Ledger,
    /// VMs being made (records without an instance).
    pub pending: i64,
}

/// Every Config's ledger (Configs deleted since included), read at `now`.
pub async fn ledgers(
    store: &dyn Store,
    trust: &Trust,
    now: DateTime<Utc>,
) -> Result<Vec<ConfigLedger>, TaskError> {
    let recs: BTreeMap<String, ConfigRecord> =
        store.configs().await?.into_iter().map(|r| (r.value.config.prefix.clone(), r.value)).collect();
    let prefixes: BTreeSet<String> = recs.keys().cloned().chain(store.ledger_configs().await?).collect();
    let mut out = Vec::with_capacity(prefixes.len());
    for prefix in prefixes {
        let record = recs.get(&prefix).cloned();
        let tenant = match &record {
            Some(r) => {
                trust.tenant_of(&r.config).map_or_else(|_| trust.tenant_of_prefix(&prefix), |(t, _)| t)
            }
            None => trust.tenant_of_prefix(&prefix),
        }
        .to_owned();
        let sums = crate::records::counts::sums(store, &prefix).await?;
        let ledger = ledger(&store.ledger(&prefix).await?, now);
        out.push(ConfigLedger { prefix, tenant, record, ledger, pending: (sums[0] - sums[1]).max(0) });
    }
    Ok(out)
}

/// The limit per hour tenant `t` is held to at `now`, having spent `spent` this month: the lower
/// of its `max_cost_per_hour` and what is left of its `budget_per_month` over the hours left.
pub fn limit(t: &Tenant, spent: f64, now: DateTime<Utc>) -> Option<Limit> {
    let hourly = t.max_cost_per_hour.map(|m| Limit { per_hour: m, by: format!("max_cost_per_hour {m}") });
    let monthly = t.budget_per_month.map(|b| {
        let hours = ((next_month(now) - now).num_seconds() as f64 / 3600.0).max(1.0);
        let left = (b.0 - spent).max(0.0);
        Limit {
            per_hour: Usd(left / hours),
            by: format!("budget_per_month {b} ({} spent, {hours:.0} h left)", Usd(spent)),
        }
    });
    match (hourly, monthly) {
        (Some(h), Some(m)) => Some(if m.per_hour.0 < h.per_hour.0 { m } else { h }),
        (h, m) => h.or(m),
    }
}

/// What tenant `tenant`'s Configs cost per hour now (VMs being made at their Config's price) and
/// spent in `now`'s month, from `all`.
pub fn tenant_now(all: &[ConfigLedger], tenant: &str, rates: &Rates, now: DateTime<Utc>) -> (f64, f64) {
    let month = month_of(now);
    all.iter().filter(|c| c.tenant == tenant).fold((0.0, 0.0), |(cost, spent), c| {
        let pending = c.record.as_ref().and_then(|r| per_hour(rates, r, now).ok()).unwrap_or(0.0);
        (cost + c.ledger.per_hour() + c.pending as f64 * pending, spent + c.ledger.month_usd(&month))
    })
}

/// The hold of Config `rec` by its tenant's budget at `now`, from `all` (the ledgers, read now);
/// none when its tenant sets no limit.
pub fn hold_of(
    trust: &Trust,
    all: &[ConfigLedger],
    rec: &ConfigRecord,
    rates: &Rates,
    now: DateTime<Utc>,
) -> Option<Hold> {
    let (name, tenant) = trust.tenant_of(&rec.config).ok()?;
    if tenant.budget_per_month.is_none() && tenant.max_cost_per_hour.is_none() {
        return None;
    }
    let (cost, spent) = tenant_now(all, name, rates, now);
    let limit = limit(tenant, spent, now)?;
    let per_vm = per_hour(rates, rec, now).ok().filter(|p| *p > 0.0);
    let room = match per_vm {
        Some(p) => ((limit.per_hour.0 - cost) / p + 1e-9).floor().max(0.0) as u64,
        None => 0,
    };
    Some(Hold { tenant: name.to_owned(), cost_per_hour: Usd(cost), limit, per_vm: per_vm.map(Usd), room })
}

/// The hold of Config `rec` now (reads every Config's ledger: only for a tenant with a limit).
pub async fn hold(
    store: &dyn Store,
    trust: &Trust,
    rates: &Rates,
    rec: &ConfigRecord,
    now: DateTime<Utc>,
) -> Result<Option<Hold>, TaskError> {
    let limited = trust
        .tenant_of(&rec.config)
        .is_ok_and(|(_, t)| t.budget_per_month.is_some() || t.max_cost_per_hour.is_some());
    if !limited {
        return Ok(None);
    }
    let all = ledgers(store, trust, now).await?;
    Ok(hold_of(trust, &all, rec, rates, now))
}

/// Puts on each of `configs` what it costs per hour now and spent this month, and, while its
/// tenant's budget holds its growth (fewer may be made than it lacks), the hold.
pub async fn fill(
    store: &dyn Store,
    trust: &Trust,
    rates: &Rates,
    configs: &mut [ConfigStatus],
    now: DateTime<Utc>,
) -> Result<(), TaskError> {
    let all = ledgers(store, trust, now).await?;
    let month = month_of(now);
    for st in configs.iter_mut() {
        let Some(c) = all.iter().find(|c| c.prefix == st.prefix) else { continue };
        st.cost_per_hour = Some(Usd(c.ledger.per_hour()));
        st.spent_this_month = Some(Usd(c.ledger.month_usd(&month)));
        let lacks = st.counts.configured.saturating_sub(st.counts.vms.saturating_sub(st.counts.draining));
        if let Some(rec) = &c.record
            && lacks > 0
        {
            st.budget = hold_of(trust, &all, rec, rates, now).filter(|h| h.room < u64::from(lacks));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
