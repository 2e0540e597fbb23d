//! The price book in memory, kept encoded as Redis keeps it (so a field another build wrote, or a
//! book that does not decode, behaves the same way in tests).

use crate::ports::store::StoreError;
use crate::prices::book::PriceBook;

use super::MemoryStore;

impl MemoryStore {
    /// `Store::put_price_book`.
    pub(super) fn write_price_book(&self, book: &PriceBook) -> Result<(), StoreError> {
        let raw = crate::unknown::stored(|| serde_json::to_string(book))
            .map_err(|e| StoreError::Unavailable(format!("cannot encode: {e}")))?;
        self.lock().price_book = Some(raw);
        Ok(())
    }

    /// `Store::price_book`: one that does not decode reads as none.
    pub(super) fn read_price_book(&self) -> Option<PriceBook> {
        let raw = self.lock().price_book.clone()?;
        serde_json::from_str(&raw)
            .map_err(|e| tracing::warn!(record = "prices", error = %e, "corrupt record ignored"))
            .ok()
    }

    /// Stores `raw` as the price book, as a raw write in Redis would (tests).
    #[cfg(any(test, feature = "testing"))]
    pub fn plant_price_book(&self, raw: &str) {
        self.lock().price_book = Some(raw.to_owned());
    }
}
