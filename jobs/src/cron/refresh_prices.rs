//! `refresh_prices`: Compute Engine's SKUs read from the Cloud Billing Catalog once a day and
//! kept in the store as the price book (`prices::book`). While the Catalog cannot be read, a
//! book read from it is kept for [`KEEP`]; past that, or when none is stored, the dated snapshot
//! embedded from `config/prices/` is. The failure is written on the book (status shows it) and
//! logged once per outage, when it starts and when it ends: the job runs once per tick across
//! processes, and the stored book says whether the last run failed already.

use chrono::{DateTime, Duration, Utc};

use crate::ctx::Ctx;
use crate::env::Ports;
use crate::error::TaskError;
use crate::ports::prices::PriceError;
use crate::{prices::book::CATALOG, prices::book::PriceBook, prices::book::Unreachable};

/// A book read from the Catalog is read again once it is this old.
pub const REFRESH: Duration = Duration::days(1);
/// How long a book read from the Catalog is kept while the Catalog cannot be read again; then
/// the snapshot takes its place.
pub const KEEP: Duration = Duration::days(7);

/// Runs once: reads the Catalog when the book is due (none, older than [`REFRESH`], or the last
/// read failed). Adds no task.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let Ports { store, prices, .. } = &ctx.ports;
    let now = ctx.now();
    let stored = store.price_book().await?;
    let due = stored
        .as_ref()
        .is_none_or(|b| !b.from_catalog() || b.unreachable.is_some() || now - b.read_at >= REFRESH);
    if !due {
        return Ok(0);
    }
    let read = prices.skus().await.and_then(|skus| {
        let book = PriceBook::read(now, CATALOG, skus);
        match book.skus.is_empty() {
            true => Err(PriceError::Malformed("no SKU of a machine or disk it prices".into())),
            false => Ok(book),
        }
    });
    match read {
        Ok(book) => {
            if let Some(u) = stored.and_then(|b| b.unreachable) {
                tracing::info!(since = %u.since, skus = book.skus.len(), "Cloud Billing Catalog read again: prices from it");
            }
            store.put_price_book(&book).await?;
        }
        Err(e) => {
            if let Some(book) = fallback(stored, &e, now)? {
                store.put_price_book(&book).await?;
            }
        }
    }
    Ok(0)
}

/// The book to store after the Catalog could not be read (`e`), if it changes: the stored one
/// (read from the Catalog within [`KEEP`], or this build's snapshot) with the failure on it, else
/// the snapshot. The first failure of an outage is logged.
fn fallback(
    stored: Option<PriceBook>,
    e: &PriceError,
    now: DateTime<Utc>,
) -> Result<Option<PriceBook>, TaskError> {
    let snapshot = PriceBook::snapshot().map_err(TaskError::Invalid)?;
    let was = stored.as_ref().and_then(|b| b.unreachable.clone());
    let keep = |b: &PriceBook| match b.from_catalog() {
        true => now - b.read_at < KEEP,
        false => b.source == snapshot.source,
    };
    let (mut book, replaced) = match stored {
        Some(b) if keep(&b) => (b, false),
        _ => (snapshot, true),
    };
    if was.is_none() {
        tracing::warn!(error = %e, prices = %book.source, "Cloud Billing Catalog cannot be read: prices from the book it last read, or the dated snapshot, until it can");
    }
    let error = e.to_string();
    if !replaced && was.as_ref().is_some_and(|u| u.error == error) {
        return Ok(None);
    }
    let since = was.map_or(now, |u| u.since);
    book.unreachable = Some(Unreachable { since, error, unknown: Default::default() });
    Ok(Some(book))
}

#[cfg(test)]
mod tests;
