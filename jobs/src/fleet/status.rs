//! The read model operators see (`gce-backend status`, progress lines): per-Config counts from
//! the VM records (and per zone and rank), errors, backoff, life state, source and pauses, a Spot pool's
//! failover, the errors of Config files, the rate-limit buckets' saturation, and prices (the
//! price book in force, each Config's price per hour of a VM).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::TaskError;
use crate::model::spot_state::SpotStatus;
use crate::model::{Backoff, ConfigState, ConfigStatus, Counts, FileError, Pause, ZoneStatus, counters};
use crate::ports::buckets::{Buckets, Level};
use crate::ports::store::{Store, StoreError};
use crate::{records::counts::tally, records::counts::zone_sums};

/// Every prefix with a Config or with VMs left (of a removed Config), sorted. While the list of
/// prefixes with VMs is being rebuilt (`heal`), the Configs only: those with VMs only are back
/// once it is.
pub async fn prefixes(store: &dyn Store) -> Result<Vec<String>, TaskError> {
    let mut p: BTreeSet<String> = store.configs().await?.into_iter().map(|c| c.value.config.prefix).collect();
    match store.vm_configs().await {
        Ok(with_vms) => p.extend(with_vms),
        Err(StoreError::Healing { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(p.into_iter().collect())
}

/// A Config's status: the counts last written by `count_vms` (or `live` ones counted now), its
/// last errors (newest first), the backoff of its (project, zone) while active, its state
/// (`grace`: the orphan grace, to say when an orphaned Config goes), source and pauses.
pub async fn status(
    store: &dyn Store,
    prefix: &str,
    now: DateTime<Utc>,
    grace: chrono::Duration,
    live: bool,
) -> Result<ConfigStatus, TaskError> {
    let counts = if live {
        tally(store, prefix, now).await?.0
    } else {
        store.counts(prefix).await?.unwrap_or_default()
    };
    let mut st = ConfigStatus {
        prefix: prefix.to_owned(),
        state: ConfigState::Deleted,
        counts,
        dead_tasks: store.counter(prefix, counters::DEAD_TASKS).await?,
        task_failures: store.counter(prefix, counters::TASK_FAILURES).await?,
        errors: store.errors(prefix).await?,
        ..ConfigStatus::default()
    };
    let global = crate::safety::pause::global(store).await?;
    st.paused_all = global.is_some();
    let config = match store.config(prefix).await {
        Err(StoreError::Corrupt { error, .. }) => {
            st.state = ConfigState::Corrupt;
            st.corrupt = Some(format!("cfg {prefix}: {error}"));
            None
        }
        Err(StoreError::Newer { .. }) => {
            st.state = ConfigState::Newer;
            None
        }
        other => other?,
    };
    if let Some(c) = config {
        let rec = c.value;
        // What its new VMs meet, per zone and rank (its Spot capacity too, for Spot VMs).
        let grid = crate::placement::ranks::grid(store, &rec.config, rec.makes_spot(now), now).await?;
        // The Config's own backoff (Compute refused its instances) first, else its zone's.
        let own = store.backoff("", prefix).await?.filter(|b| b.until > now);
        st.backoff = own.or_else(|| grid.first().filter(|_| rec.config.zones.is_empty())?.backoff.clone());
        let sums = match rec.config.zones.is_empty() {
            true => Default::default(),
            false => zone_sums(store, prefix).await?,
        };
        for (z, g) in rec.config.zones.iter().zip(&grid) {
            let backoff = g.backoff.clone();
            let n = sums.get(&z.zone).map(|s| Counts::from_sums(0, s, now)).unwrap_or_default();
            st.zones.push(ZoneStatus {
                zone: z.zone.clone(),
                weight: z.weight,
                vms: sums.get(&z.zone).map_or(0, |s| s[0].clamp(0, i64::from(u32::MAX)) as u32),
                connected: n.connected,
                draining: n.draining,
                backoff,
            });
        }
        st.ranks = crate::placement::ranks::status(store, &rec.config, &grid, now).await?;
        st.state = if rec.orphaned.is_some() { ConfigState::Orphaned } else { ConfigState::Active };
        st.delete_at = rec.delete_at.or(rec.orphaned.map(|t| t + grace));
        st.source = rec.source;
        st.revision = rec.revision;
        st.verified = rec.verified;
        st.paused = rec.paused;
        st.breaker = rec.breaker.open;
        st.rollout = rec.rollout;
        st.demand = rec.demand.filter(|_| rec.config.demand.is_some());
        st.resources = rec.resources;
        st.spot = rec.config.spot_failover.as_ref().map(|r| SpotStatus::of(&rec.spot, r, now));
    }
    // Else the first of its zones that backs off, else the first rank's machine type that does
    // (named as its backoff is: `<zone>/<machine type>`).
    st.backoff =
        st.backoff.take().or_else(|| st.zones.iter().find_map(|z| z.backoff.clone())).or_else(|| {
            st.ranks.iter().find_map(|r| {
                let b = r.backoffs.first()?;
                Some(Backoff { zone: format!("{}/{}", b.zone, r.machine_type), ..b.clone() })
            })
        });
    st.pause_in_force = crate::safety::pause::in_force(st.paused.as_ref(), global.as_ref());
    Ok(st)
}

/// Everything `gce-backend status` prints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    /// One entry per Config (and per prefix with VMs left).
    pub configs: Vec<ConfigStatus>,
    /// Config files that hold no Config because of an error.
    pub files: Vec<FileError>,
    /// The global pause (every Config), while set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// The rate-limit buckets used within the last hour (per project and class of Compute
    /// calls): the rate now and how often calls found no token; `saturated` while one did within
    /// the last minute.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<Level>,
    /// The price book each Config's `price_per_hour` is read from: its source, when read, how
    /// many SKUs, and while the Cloud Billing Catalog cannot be read, why and since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<PricesStatus>,
}

/// How long after a call found no token its bucket is shown as saturated.
const SATURATED_FOR: chrono::Duration = chrono::Duration::minutes(1);

/// The rate-limit buckets now, each marked saturated while a call found it empty within the last
/// minute.
pub async fn rate_levels(buckets: &dyn Buckets, now: DateTime<Utc>) -> Result<Vec<Level>, TaskError> {
    let mut levels = buckets.levels().await?;
    for l in &mut levels {
        l.saturated = l.last_wait.is_some_and(|t| now - t < SATURATED_FOR);
    }
    Ok(levels)
}

/// The status of `only` (every prefix when empty), the file errors and the rate-limit buckets.
pub async fn report(
    store: &dyn Store,
    buckets: &dyn Buckets,
    only: &[String],
    now: DateTime<Utc>,
    grace: chrono::Duration,
    live: bool,
    trust: &crate::config::Trust,
) -> Result<Report, TaskError> {
    let all = prefixes(store).await?;
    let wanted = if only.is_empty() { all } else { only.to_vec() };
    let mut configs = Vec::new();
    for p in wanted {
        match status(store, &p, now, grace, live).await {
            Ok(st) => configs.push(st),
            // One broken entity does not hide the others.
            Err(TaskError::Store(e @ (StoreError::Corrupt { .. } | StoreError::Healing { .. }))) => {
                let why = match e {
                    StoreError::Corrupt { key, error, .. } => format!("{key}: {error}"),
                    other => other.to_string().trim_start_matches("store: ").to_owned(),
                };
                configs.push(ConfigStatus {
                    prefix: p,
                    state: ConfigState::Corrupt,
                    corrupt: Some(why),
                    ..ConfigStatus::default()
                })
            }
            Err(e) => return Err(e),
        }
    }
    let paused = crate::safety::pause::global(store).await?;
    let rate_limits = rate_levels(buckets, now).await?;
    let book = crate::catalog::price_book(store).await?;
    let rates = book.rates();
    let prices = Some(prices::fill(store, &book, &rates, &mut configs, now).await?);
    crate::spend::fill(store, trust, &rates, &mut configs, now).await?;
    Ok(Report { configs, files: store.file_errors().await?, paused, rate_limits, prices })
}

pub mod prices;

pub use prices::PricesStatus;

#[cfg(test)]
mod tests;
