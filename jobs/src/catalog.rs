//! What Compute Engine offers a project (its zones, and the disk types of each zone), asked
//! once and cached, so a Config naming a zone or disk type that does not exist is refused at
//! import with the field named, instead of failing at every insert; and what it costs: the price
//! book in force (the stored one, else the dated snapshot), its rates cached alike.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

use crate::config::{Config, ConfigError};
use crate::error::TaskError;
use crate::ports::compute::{Compute, ComputeError, Kind};
use crate::ports::store::Store;
use crate::prices::Rates;
use crate::prices::book::PriceBook;

/// How long an answer is trusted.
const TTL_SECS: i64 = 600;

/// "No such project": the one answer that says a Config is wrong rather than Compute down.
fn unknown_project(c: &Config, e: &ComputeError) -> ConfigError {
    ConfigError {
        field: format!("{}.attributes.project", c.prefix),
        rule: format!("Compute Engine does not know it: {e}"),
    }
}

/// Why a regional Config whose region's zones Compute could not list now (`why`) is not
/// applied ([`Verdict::Unplaced`]).
fn region_unknown(c: &Config, why: &str) -> ConfigError {
    ConfigError {
        field: format!("{}.region", c.prefix),
        rule: format!(
            "its zones are not known: Compute Engine cannot list project {}'s zones now ({why}); applied once it can",
            c.attributes.project
        ),
    }
}

/// The verdict on a Config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its zone and disk types exist.
    Valid,
    /// A field names something the project does not have.
    Invalid(ConfigError),
    /// Compute could not be asked (unreachable, rate-limited): check again later.
    Unknown(String),
    /// A regional Config whose region's zones Compute could not list now (the error says so,
    /// on `region`): without them it has nowhere to make VMs, so it is not applied until it can.
    Unplaced(ConfigError),
}

type Cached = (DateTime<Utc>, Vec<String>);

/// Cached zone and disk type lists, per project and per (project, zone).
#[derive(Debug, Default)]
pub struct Catalog {
    zones: Mutex<HashMap<String, Cached>>,
    disk_types: Mutex<HashMap<(String, String), Cached>>,
    rates: Mutex<Option<(DateTime<Utc>, Arc<Rates>)>>,
}

/// The price book in force: the stored one, else the snapshot embedded from `config/prices/`
/// (until the first refresh).
pub async fn price_book(store: &dyn Store) -> Result<PriceBook, TaskError> {
    match store.price_book().await? {
        Some(b) => Ok(b),
        None => PriceBook::snapshot().map_err(TaskError::Invalid),
    }
}

fn fresh<K: std::hash::Hash + Eq>(
    m: &Mutex<HashMap<K, Cached>>,
    k: &K,
    now: DateTime<Utc>,
) -> Option<Vec<String>> {
    let m = m.lock().unwrap_or_else(|e| e.into_inner());
    m.get(k).filter(|(at, _)| *at + Duration::seconds(TTL_SECS) > now).map(|(_, v)| v.clone())
}

fn keep<K: std::hash::Hash + Eq>(m: &Mutex<HashMap<K, Cached>>, k: K, now: DateTime<Utc>, v: &[String]) {
    m.lock().unwrap_or_else(|e| e.into_inner()).insert(k, (now, v.to_vec()));
}

impl Catalog {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    async fn zones(
        &self,
        compute: &dyn Compute,
        project: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, ComputeError> {
        let key = project.to_owned();
        if let Some(v) = fresh(&self.zones, &key, now) {
            return Ok(v);
        }
        let v = compute.zones(project).await?;
        keep(&self.zones, key, now, &v);
        Ok(v)
    }

    async fn disk_types(
        &self,
        compute: &dyn Compute,
        project: &str,
        zone: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, ComputeError> {
        let key = (project.to_owned(), zone.to_owned());
        if let Some(v) = fresh(&self.disk_types, &key, now) {
            return Ok(v);
        }
        let v = compute.disk_types(project, zone).await?;
        keep(&self.disk_types, key, now, &v);
        Ok(v)
    }

    /// The rates of the price book in force ([`price_book`]), read at most every ten minutes.
    pub async fn rates(&self, store: &dyn Store, now: DateTime<Utc>) -> Result<Arc<Rates>, TaskError> {
        let cached = self.rates.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some((_, r)) = cached.filter(|(at, _)| *at + Duration::seconds(TTL_SECS) > now && *at <= now) {
            return Ok(r);
        }
        let r = Arc::new(price_book(store).await?.rates());
        *self.rates.lock().unwrap_or_else(|e| e.into_inner()) = Some((now, r.clone()));
        Ok(r)
    }

    /// Fills a regional Config's zones with the project's zones in its region (see
    /// [`Config::fill_region`]): invalid when it has none there or the project does not exist,
    /// unplaced while Compute cannot say.
    pub async fn place(&self, compute: &dyn Compute, c: &mut Config, now: DateTime<Utc>) -> Verdict {
        if !c.needs_region_zones() {
            return Verdict::Valid;
        }
        match self.zones(compute, &c.attributes.project, now).await {
            Ok(known) => c.fill_region(&known).map_or_else(Verdict::Invalid, |()| Verdict::Valid),
            Err(e) if e.kind == Kind::NotFound => Verdict::Invalid(unknown_project(c, &e)),
            Err(e) => Verdict::Unplaced(region_unknown(c, &e.to_string())),
        }
    }

    /// Checks `c`'s zone and disk types against its project.
    pub async fn check(&self, compute: &dyn Compute, c: &Config, now: DateTime<Utc>) -> Verdict {
        match self.try_check(compute, c, now).await {
            Ok(None) => Verdict::Valid,
            Ok(Some(e)) => Verdict::Invalid(e),
            // Only "no such project" says the Config is wrong; permissions, quota and outages
            // are Compute's side: import, and check again later.
            Err(e) if e.kind == Kind::NotFound => Verdict::Invalid(unknown_project(c, &e)),
            Err(e) => Verdict::Unknown(e.to_string()),
        }
    }

    async fn try_check(
        &self,
        compute: &dyn Compute,
        c: &Config,
        now: DateTime<Utc>,
    ) -> Result<Option<ConfigError>, ComputeError> {
        let a = &c.attributes;
        let field = |f: &str| format!("{}.attributes.{f}", c.prefix);
        let known = self.zones(compute, &a.project, now).await?;
        for (i, zone) in c.zone_names().into_iter().enumerate() {
            if !known.iter().any(|z| z == zone) {
                let at =
                    if c.zones.is_empty() { field("zone") } else { format!("{}.zones[{i}].zone", c.prefix) };
                let rule = format!("project {} has no zone {zone:?} (zones.list)", a.project);
                return Ok(Some(ConfigError { field: at, rule }));
            }
            if let Some(e) = self.check_disks(compute, c, zone, now).await? {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    /// The disk types of `c` in `zone`.
    async fn check_disks(
        &self,
        compute: &dyn Compute,
        c: &Config,
        zone_of_vm: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<ConfigError>, ComputeError> {
        let a = &c.attributes;
        let field = |f: &str| format!("{}.attributes.{f}", c.prefix);
        for (i, d) in a.disk.iter().enumerate() {
            let Some((zone, kind)) = d.kind.strip_prefix("zones/").and_then(|k| k.split_once("/diskTypes/"))
            else {
                continue;
            };
            let zone = if zone == "{{.Zone}}" { zone_of_vm } else { zone };
            if zone != zone_of_vm {
                return Ok(Some(ConfigError {
                    field: field(&format!("disk[{i}].type")),
                    rule: format!(
                        "names zone {zone:?}, but the instance is in {zone_of_vm:?} (use {{{{.Zone}}}})"
                    ),
                }));
            }
            let types = self.disk_types(compute, &a.project, zone, now).await?;
            if !types.iter().any(|t| t == kind) {
                return Ok(Some(ConfigError {
                    field: field(&format!("disk[{i}].type")),
                    rule: format!("zone {zone} has no disk type {kind:?} (known: {})", types.join(", ")),
                }));
            }
        }
        Ok(None)
    }
}
