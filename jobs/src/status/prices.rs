//! Prices on status: the price book in force (the stored one, else the snapshot embedded from
//! `config/prices/` until the first refresh), and what one running VM of each Config costs at
//! it. What cannot be priced says why: never free.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::region_of;
use crate::error::TaskError;
use crate::model::{ConfigRecord, ConfigStatus};
use crate::ports::store::Store;
use crate::prices::book::{PriceBook, Usd};
use crate::prices::{Rates, Unpriced};

/// The price book in force, as status shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PricesStatus {
    /// Where its prices come from: `catalog` (the Cloud Billing Catalog API) or
    /// `snapshot <date>` (the dated snapshot in `config/prices/`: the Catalog has not been read,
    /// or could not be for a week).
    pub source: String,
    /// When they were read (a snapshot's: its date).
    pub read_at: DateTime<Utc>,
    /// How many SKUs it prices with.
    pub skus: usize,
    /// While the Catalog cannot be read: why, at the last refresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<String>,
    /// While the Catalog cannot be read: since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable_since: Option<DateTime<Utc>>,
}

/// What status says of `book`.
pub fn of(book: &PriceBook) -> PricesStatus {
    PricesStatus {
        source: book.source.clone(),
        read_at: book.read_at,
        skus: book.skus.len(),
        unreachable: book.unreachable.as_ref().map(|u| u.error.clone()),
        unreachable_since: book.unreachable.as_ref().map(|u| u.since),
    }
}

/// USD per hour of one running VM `rec` makes now: its machine type (the first rank's) in its
/// region (its first zone's), Spot or standard as its new VMs are (a Spot failover in force
/// makes them standard), plus its disks.
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
    let (a, _) = rec.new_vm_attributes(zone, None, now);
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
    Ok(total)
}

/// Puts on each of `configs` with a stored Config its price per hour, or why it has none, at the
/// book in force; returns what status says of that book.
pub async fn fill(
    store: &dyn Store,
    configs: &mut [ConfigStatus],
    now: DateTime<Utc>,
) -> Result<PricesStatus, TaskError> {
    let book = crate::catalog::price_book(store).await?;
    let rates = book.rates();
    let recs = store.configs().await?;
    for st in configs.iter_mut() {
        let Some(rec) = recs.iter().find(|r| r.value.config.prefix == st.prefix) else { continue };
        match per_hour(&rates, &rec.value, now) {
            Ok(usd) => st.price_per_hour = Some(Usd(usd)),
            Err(Unpriced(why)) => st.unpriced = Some(why),
        }
    }
    Ok(of(&book))
}

#[cfg(test)]
mod tests;
