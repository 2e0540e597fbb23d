//! Prices on status: the price book in force (the stored one, else the snapshot embedded from
//! `config/prices/` until the first refresh), and what one running VM of each Config costs at
//! it. What cannot be priced says why: never free.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::TaskError;
use crate::model::ConfigStatus;
use crate::ports::store::Store;
use crate::{prices::Rates, prices::Unpriced};
use crate::{prices::book::PriceBook, prices::book::Usd};

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

/// Puts on each of `configs` with a stored Config its price per hour, or why it has none, at
/// `book` (the book in force; `rates` its rates); returns what status says of that book.
pub async fn fill(
    store: &dyn Store,
    book: &PriceBook,
    rates: &Rates,
    configs: &mut [ConfigStatus],
    now: DateTime<Utc>,
) -> Result<PricesStatus, TaskError> {
    let recs = store.configs().await?;
    for st in configs.iter_mut() {
        let Some(rec) = recs.iter().find(|r| r.value.config.prefix == st.prefix) else { continue };
        match crate::spend::per_hour(rates, &rec.value, now) {
            Ok(usd) => st.price_per_hour = Some(Usd(usd)),
            Err(Unpriced(why)) => st.unpriced = Some(why),
        }
    }
    Ok(of(book))
}

#[cfg(test)]
mod tests;
