//! A price book: the Compute Engine SKUs prices are read from, with where and when they were
//! read: the Cloud Billing Catalog API (`refresh_prices`, daily), or the dated snapshot embedded
//! from `config/prices/` (the fallback while the API cannot be reached, and until it first is).

use std::sync::LazyLock;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use super::{Rates, Sku};
use crate::unknown::Unknown;

/// The dated snapshot's path in the repository, as messages name it.
pub const SNAPSHOT_PATH: &str = "config/prices/compute-engine-2026-12-07.json";
/// The snapshot's text, embedded (the one file the simulator serves too).
const SNAPSHOT: &str = include_str!("../../../config/prices/compute-engine-2026-12-07.json");
/// [`PriceBook::source`] of a book read from the Cloud Billing Catalog API.
pub const CATALOG: &str = "catalog";

/// Compute Engine's SKUs as read once, kept in the store (one record).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PriceBook {
    /// When they were read (the snapshot's: its date, at midnight UTC).
    pub read_at: DateTime<Utc>,
    /// [`CATALOG`], or `snapshot <date>` for the dated snapshot.
    pub source: String,
    /// The SKUs [`Rates::from_skus`] prices with (the others are not kept), in the Catalog's
    /// format.
    #[serde(default)]
    pub skus: Vec<Sku>,
    /// Since when, and why, the Catalog API could not be read (the last refresh failed); absent
    /// once it is read again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<Unreachable>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// The Catalog API could not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unreachable {
    /// Since when (the first refresh that failed).
    pub since: DateTime<Utc>,
    /// The last failure.
    pub error: String,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    pub unknown: Unknown,
}

pub use crate::config::Usd;

/// The snapshot file, the fields read here.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotFile {
    snapshot_date: NaiveDate,
    skus: Vec<Sku>,
}

static EMBEDDED: LazyLock<Result<PriceBook, String>> = LazyLock::new(|| {
    let f: SnapshotFile = serde_json::from_str(SNAPSHOT).map_err(|e| format!("{SNAPSHOT_PATH}: {e}"))?;
    let read_at = f.snapshot_date.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
    Ok(PriceBook::read(read_at, &format!("snapshot {}", f.snapshot_date), f.skus))
});

impl PriceBook {
    /// A book of `skus` read from `source` at `read_at`, keeping the SKUs that price something.
    pub fn read(read_at: DateTime<Utc>, source: &str, skus: Vec<Sku>) -> Self {
        let skus =
            skus.into_iter().filter(|s| !Rates::from_skus(std::slice::from_ref(s)).is_empty()).collect();
        Self { read_at, source: source.to_owned(), skus, unreachable: None, unknown: Unknown::default() }
    }

    /// The dated snapshot embedded from `config/prices/` (its file is checked by the tests: one
    /// that does not parse is an error here, and no prices).
    pub fn snapshot() -> Result<Self, String> {
        EMBEDDED.clone()
    }

    /// Whether it was read from the Catalog API.
    pub fn from_catalog(&self) -> bool {
        self.source == CATALOG
    }

    /// Its rates.
    pub fn rates(&self) -> Rates {
        Rates::from_skus(&self.skus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_is_a_book_of_its_date_pricing_every_sku_it_keeps() {
        let book = PriceBook::snapshot().unwrap();
        assert_eq!(book.source, "snapshot 2026-12-07");
        assert_eq!(book.read_at.to_rfc3339(), "2026-12-07T00:00:00+00:00");
        assert!(!book.from_catalog());
        assert!(!book.skus.is_empty());
        let e2 = book.rates().machine_per_hour("e2-standard-2", "us-central1", false).unwrap();
        assert!(e2 > 0.05 && e2 < 0.1, "{e2}");
    }

    #[test]
    fn a_book_keeps_only_what_prices_something_and_reads_back_whole() {
        let mut skus = PriceBook::snapshot().unwrap().skus;
        let n = skus.len();
        let mut other = skus[0].clone();
        other.category.usage_type = "Commit1Yr".into();
        skus.push(other);
        let book = PriceBook::read(DateTime::UNIX_EPOCH, CATALOG, skus);
        assert_eq!(book.skus.len(), n, "the commitment left out");
        let mut json = serde_json::to_value(&book).unwrap();
        json["from_the_future"] = serde_json::json!(1);
        let back: PriceBook = serde_json::from_value(json).unwrap();
        assert_eq!(back.rates(), book.rates());
        assert!(back.from_catalog());
        assert_eq!(serde_json::to_value(&back).unwrap()["from_the_future"], 1, "kept");
    }
}
