//! The audit trail in Redis: one LIST per Config (`audit:<prefix>`; in layout 2 under the
//! Config's tag) and one global list
//! (`audit`), newest first, pushed and trimmed to its bound in one MULTI.

use gce_backend_jobs::model::{AuditEntry, GLOBAL_AUDIT};
use gce_backend_jobs::ports::store::StoreError;
use redis::AsyncCommands;

use super::RedisStore;
use super::conn::{err, json};
use super::layout::Layout;

impl RedisStore {
    /// The key of `prefix`'s list in layout `l` (the global one for [`GLOBAL_AUDIT`]).
    fn audit_key(&self, l: Layout, prefix: &str) -> String {
        match prefix {
            GLOBAL_AUDIT => self.k("audit"),
            p => self.owned(l, p, "audit"),
        }
    }

    /// `Store::push_audit`.
    pub(super) async fn push_audit_entry(&self, e: &AuditEntry, keep: usize) -> Result<(), StoreError> {
        let key = self.audit_key(self.writing().await?, &e.prefix);
        self.push_capped(&key, json(e)?, keep).await
    }

    /// `Store::audit`.
    pub(super) async fn audit_entries(
        &self,
        prefix: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let (start, stop) = (offset as isize, (offset + limit) as isize - 1);
        let key = self.audit_key(self.layout().await?, prefix);
        let raw: Vec<String> = self.c().lrange(key, start, stop).await.map_err(err)?;
        // An entry that does not decode is left out rather than hiding the others.
        Ok(raw.iter().filter_map(|r| serde_json::from_str(r).ok()).collect())
    }
}
