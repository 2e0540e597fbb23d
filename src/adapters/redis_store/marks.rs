//! Marks in Redis (`mark:<space>`, a HASH: key → the time it was first marked, RFC 3339): the
//! first mark kept, read one or all.

use chrono::{DateTime, Utc};
use gce_backend_jobs::ports::store::StoreError;
use redis::AsyncCommands;

use super::RedisStore;
use super::conn::err;

impl RedisStore {
    /// The HASH of mark space `space`.
    pub(super) fn mark_key(&self, space: &str) -> String {
        self.k(&format!("mark:{space}"))
    }

    /// `Store::mark`: `key` marked at `now` unless it was before; the first time.
    pub(super) async fn mark_first(
        &self,
        space: &str,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, StoreError> {
        let hash = self.mark_key(space);
        let (_, first): (bool, String) = redis::pipe()
            .atomic()
            .hset_nx(&hash, key, now.to_rfc3339())
            .hget(&hash, key)
            .query_async(&mut self.c())
            .await
            .map_err(err)?;
        DateTime::parse_from_rfc3339(&first)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| StoreError::corrupt(format!("mark:{space} {key}"), e))
    }

    /// `Store::marks`: every key of `space` with its time (one that does not parse left out).
    pub(super) async fn marks_in(&self, space: &str) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        let all: std::collections::HashMap<String, String> =
            self.c().hgetall(self.mark_key(space)).await.map_err(err)?;
        all.into_iter()
            .filter_map(|(k, v)| Some(Ok((k, DateTime::parse_from_rfc3339(&v).ok()?.with_timezone(&Utc)))))
            .collect()
    }

    /// `Store::marked`: when `key` of `space` was first marked, if it is.
    pub(super) async fn marked_at(
        &self,
        space: &str,
        key: &str,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        let at: Option<String> = self.c().hget(self.mark_key(space), key).await.map_err(err)?;
        Ok(at.and_then(|v| DateTime::parse_from_rfc3339(&v).ok()).map(|t| t.with_timezone(&Utc)))
    }
}
