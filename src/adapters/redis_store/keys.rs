//! The keys of a Config's data in the store's layout (`layout.rs`), and the layout a process
//! acts in: read at most every `LAYOUT_TTL`, refused for writes while the store is migrating.

use gce_backend_jobs::ports::store::StoreError;

use super::RedisStore;
use super::conn::err;
use super::layout::{Layout, migrating, vm_prefix_of_host};

impl RedisStore {
    /// The layout, as read at most `LAYOUT_TTL` ago.
    pub(super) async fn layout(&self) -> Result<Layout, StoreError> {
        self.layout
            .get(async {
                let raw: Option<String> =
                    redis::cmd("GET").arg(self.k("layout")).query_async(&mut self.c()).await.map_err(err)?;
                Layout::parse(raw.as_deref())
            })
            .await
    }

    /// The store's key layout, as this process acts on it.
    pub async fn key_layout(&self) -> Result<Layout, StoreError> {
        self.layout().await
    }

    /// The layout, refusing while the store is being migrated: for writes.
    pub(super) async fn writing(&self) -> Result<Layout, StoreError> {
        match self.layout().await? {
            Layout::Migrating => Err(migrating()),
            l => Ok(l),
        }
    }

    /// Forgets the layout read, so the next call reads it (after a script refused a write).
    pub(super) async fn forget_layout(&self) {
        self.layout.forget().await;
    }

    /// The hash tag of Config `prefix`'s keys in layout 2.
    pub(super) fn tag(&self, prefix: &str) -> String {
        format!("{{{}:c:{prefix}}}", self.ns)
    }

    /// Key `part` of Config `prefix` in layout 2.
    pub(super) fn kc(&self, prefix: &str, part: &str) -> String {
        format!("{}:{part}", self.tag(prefix))
    }

    /// A Config's own list or hash `part` (`err`, `audit`, `counters`, `series:cfg`, `sums`) in
    /// layout `l`: `{<ns>:db}:<part>:<prefix>` in layout 1, `{<ns>:c:<prefix>}:<part>` in 2.
    pub(super) fn owned(&self, l: Layout, prefix: &str, part: &str) -> String {
        match l {
            Layout::Two => self.kc(prefix, part),
            Layout::One | Layout::Migrating => self.k(&format!("{part}:{prefix}")),
        }
    }

    /// The bot observations' hash a hostname's observation lives in: in layout 2 its Config's
    /// (by the prefix in the hostname), or the shared one for a name of no VM's shape.
    pub(super) fn bots_key(&self, l: Layout, hostname: &str) -> String {
        match (l, vm_prefix_of_host(hostname)) {
            (Layout::Two, Some(prefix)) => self.kc(prefix, "bots"),
            _ => self.k("bots"),
        }
    }

    /// Key `part` (`bucket`, `places`) of rate-limit key `key` (`<project>/<class>`) in layout
    /// `l`: `{<ns>:db}:<part>:<key>` in layout 1, under the project's own tag in layout 2
    /// (`{<ns>:b:<project>}:<part>:<key>`).
    pub(super) fn limit_key(&self, l: Layout, part: &str, key: &str) -> String {
        match l {
            Layout::Two => {
                let project = key.split('/').next().unwrap_or(key);
                format!("{{{}:b:{project}}}:{part}:{key}", self.ns)
            }
            Layout::One | Layout::Migrating => self.k(&format!("{part}:{key}")),
        }
    }
}
