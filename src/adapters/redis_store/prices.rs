//! The price book in Redis: one STRING, `prices` under `{<ns>:db}` in either layout (JSON of
//! `PriceBook`), replaced whole by each refresh and read tolerantly (one that does not decode is
//! as good as absent: the next refresh writes it again).

use gce_backend_jobs::ports::store::StoreError;
use gce_backend_jobs::prices::book::PriceBook;
use redis::AsyncCommands;

use super::RedisStore;
use super::conn::{err, json, lenient};

impl RedisStore {
    /// `Store::put_price_book`.
    pub(super) async fn write_price_book(&self, book: &PriceBook) -> Result<(), StoreError> {
        self.c().set(self.k("prices"), json(book)?).await.map_err(err)
    }

    /// `Store::price_book`.
    pub(super) async fn read_price_book(&self) -> Result<Option<PriceBook>, StoreError> {
        let raw: Option<String> = self.c().get(self.k("prices")).await.map_err(err)?;
        Ok(raw.and_then(|r| lenient("prices", &r)))
    }
}
