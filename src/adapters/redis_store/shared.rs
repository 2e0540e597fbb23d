//! Backoffs in Redis (`backoff`, a HASH under `{<ns>:db}` in either layout: `project/zone` →
//! the backoff, JSON), read one or many at once.

use gce_backend_jobs::model::Backoff;
use gce_backend_jobs::ports::store::StoreError;
use redis::AsyncCommands;

use super::RedisStore;
use super::conn::{err, json, lenient};

impl RedisStore {
    /// `Store::set_backoff`.
    pub(super) async fn write_backoff(
        &self,
        project: &str,
        zone: &str,
        b: Option<&Backoff>,
    ) -> Result<(), StoreError> {
        let field = format!("{project}/{zone}");
        match b {
            Some(b) => self.c().hset(self.k("backoff"), field, json(b)?).await.map_err(err),
            None => self.c().hdel(self.k("backoff"), field).await.map_err(err),
        }
    }

    /// `Store::backoffs`: one that does not decode reads as none.
    pub(super) async fn read_backoffs(
        &self,
        scopes: &[(&str, &str)],
    ) -> Result<Vec<Option<Backoff>>, StoreError> {
        if scopes.is_empty() {
            return Ok(Vec::new()); // (HMGET needs a field)
        }
        let fields: Vec<String> = scopes.iter().map(|(p, z)| format!("{p}/{z}")).collect();
        let raw: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(self.k("backoff"))
            .arg(&fields)
            .query_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(raw
            .iter()
            .zip(&fields)
            .map(|(r, f)| r.as_ref().and_then(|r| lenient(&format!("backoff {f}"), r)))
            .collect())
    }

    /// `Store::clear_backoffs`.
    pub(super) async fn drop_backoffs(&self, scopes: &[(&str, &str)]) -> Result<(), StoreError> {
        let fields: Vec<String> = scopes.iter().map(|(p, z)| format!("{p}/{z}")).collect();
        self.c().hdel(self.k("backoff"), fields).await.map_err(err)
    }
}
