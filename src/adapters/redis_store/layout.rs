//! Which key layout a deployment's store is in, and the keys each layout gives a Config's data.
//!
//! - **Layout 1** (every deployment before issue 38): every key under `{<ns>:db}`, one Cluster
//!   slot; a Config's lists carry its prefix in their name (`err:<prefix>`, `sums:<prefix>`, …).
//! - **Layout 2**: what a Config owns (its VMs and their indexes, sums, bot observations, errors,
//!   audit trail, counters, samples) under the Config's own tag `{<ns>:c:<prefix>}`, so Configs
//!   spread over a cluster's slots; what spans Configs stays under `{<ns>:db}` (see `v2/mod.rs`).
//!
//! `{<ns>:db}:layout` says which (absent: 1; `migrating` while `gce-backend recover migrate`
//! moves the data, when every write waits; `2`). A process reads it at most every
//! [`LAYOUT_TTL`]; the layout-1 record writes also check it inside their scripts, so a write
//! racing the switch is refused rather than written to the old keys. A layout never goes back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use gce_backend_jobs::ports::store::StoreError;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::RedisStore;
use super::conn::err;

/// How long a process acts on the layout it read before reading it again.
pub(super) const LAYOUT_TTL: std::time::Duration = std::time::Duration::from_secs(2);

/// A deployment's key layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Every key under `{<ns>:db}`.
    One,
    /// Layout 1 being moved to layout 2: reads see layout 1, writes wait.
    Migrating,
    /// A Config's keys under `{<ns>:c:<prefix>}`.
    Two,
}

impl Layout {
    /// As stored in `{<ns>:db}:layout` (`None`: absent).
    pub(super) fn parse(raw: Option<&str>) -> Result<Self, StoreError> {
        match raw {
            None | Some("1") => Ok(Layout::One),
            Some("migrating") => Ok(Layout::Migrating),
            Some("2") => Ok(Layout::Two),
            Some(other) => Err(StoreError::Unavailable(format!(
                "the store's key layout {other:?} is unknown to this build (a newer build moved it): \
                 run that build"
            ))),
        }
    }

    /// As stored.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Layout::One => "1",
            Layout::Migrating => "migrating",
            Layout::Two => "2",
        }
    }

    fn code(self) -> u8 {
        match self {
            Layout::One => 1,
            Layout::Migrating => 2,
            Layout::Two => 3,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(Layout::One),
            2 => Some(Layout::Migrating),
            3 => Some(Layout::Two),
            _ => None,
        }
    }
}

/// The layout a process last read, and when.
#[derive(Debug, Default)]
pub(super) struct LayoutCache {
    value: AtomicU8,
    read_at: Mutex<Option<Instant>>,
}

/// The error of a write while the store is being migrated.
pub(super) fn migrating() -> StoreError {
    StoreError::Unavailable(
        "the store is moving to its new key layout (gce-backend recover migrate): writes wait until it is done"
            .to_owned(),
    )
}

impl RedisStore {
    /// The layout, as read at most [`LAYOUT_TTL`] ago.
    pub(super) async fn layout(&self) -> Result<Layout, StoreError> {
        let cache: &Arc<LayoutCache> = &self.layout;
        let mut at = cache.read_at.lock().await;
        if let (Some(l), Some(t)) = (Layout::from_code(cache.value.load(Ordering::Acquire)), *at)
            && t.elapsed() < LAYOUT_TTL
        {
            return Ok(l);
        }
        let raw: Option<String> =
            redis::cmd("GET").arg(self.k("layout")).query_async(&mut self.c()).await.map_err(err)?;
        let l = Layout::parse(raw.as_deref())?;
        cache.value.store(l.code(), Ordering::Release);
        *at = Some(Instant::now());
        Ok(l)
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
        *self.layout.read_at.lock().await = None;
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
}

/// The Config prefix in a hostname of the shape `<prefix>-<index>-<4 chars>`.
pub(super) fn vm_prefix_of_host(hostname: &str) -> Option<&str> {
    let id = gce_backend_jobs::naming::vm_id_of(hostname)?;
    gce_backend_jobs::naming::parse_id(id).map(|(p, _)| p)
}
