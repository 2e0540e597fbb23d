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

use gce_backend_jobs::ports::store::StoreError;
use tokio::sync::Mutex;
use tokio::time::Instant;

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
}

/// The layout a process last read, and when.
#[derive(Debug, Default)]
pub(super) struct LayoutCache(Mutex<Option<(Layout, Instant)>>);

impl LayoutCache {
    /// The layout read less than [`LAYOUT_TTL`] ago, else `read()`'s (kept), one read at a time.
    pub(super) async fn get<F>(&self, read: F) -> Result<Layout, StoreError>
    where
        F: std::future::Future<Output = Result<Layout, StoreError>>,
    {
        let mut held = self.0.lock().await;
        if let Some((l, t)) = *held
            && t.elapsed() < LAYOUT_TTL
        {
            return Ok(l);
        }
        let l = read.await?;
        *held = Some((l, Instant::now()));
        Ok(l)
    }

    /// Forgets the layout read: the next [`LayoutCache::get`] reads it.
    pub(super) async fn forget(&self) {
        *self.0.lock().await = None;
    }
}

/// The error of a write while the store is being migrated.
pub(super) fn migrating() -> StoreError {
    StoreError::Unavailable(
        "the store is moving to its new key layout (gce-backend recover migrate): writes wait until it is done"
            .to_owned(),
    )
}

/// The Config prefix in a hostname of the shape `<prefix>-<index>-<4 chars>`.
pub(super) fn vm_prefix_of_host(hostname: &str) -> Option<&str> {
    let id = gce_backend_jobs::naming::vm_id_of(hostname)?;
    gce_backend_jobs::naming::parse_id(id).map(|(p, _)| p)
}
