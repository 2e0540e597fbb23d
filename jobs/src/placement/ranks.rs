//! Which of its ranked machine types a Config's new VM is made of, in one place. Rank 0 is
//! `attributes.machine_type`, each of `fallback_machine_types` the next. A refusal for want of
//! capacity or quota backs off the rank's machine type in the zone (`backoff::Scope::refused`),
//! so a new VM there gets the first rank whose machine type does not back off (the preferred one
//! again as soon as its backoff ends); a zone where every rank backs off (or the zone itself)
//! is closed, and a multi-zone Config's VMs go to its other zones (`zones`). A VM keeps its
//! rank for its incarnation; one not sent yet whose rank backs off is made again at once on the
//! next open rank ([`elsewhere`]). A Config without fallbacks has one rank and backs off whole
//! zones, as before.

use chrono::{DateTime, Utc};

use crate::config::{Config, short_machine_type};
use crate::env::Env;
use crate::error::TaskError;
use crate::model::{Backoff, Counts, RankStatus, Vm, counters};
use crate::placement::backoff::Scope;
use crate::ports::store::Store;

/// A zone of a Config as placement sees it: its own backoff and each rank's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneRanks {
    /// The zone.
    pub zone: String,
    /// The zone's own backoff (every rank waits for it), while active.
    pub backoff: Option<Backoff>,
    /// The backoff of each rank's machine type in the zone, while active, by rank (empty for a
    /// Config without fallbacks: its zone backoff says it all).
    pub ranks: Vec<Option<Backoff>>,
}

impl ZoneRanks {
    /// True when `rank` may be tried in the zone now: neither the zone nor the rank backs off.
    pub fn is_open(&self, rank: u32) -> bool {
        self.backoff.is_none() && self.ranks.get(rank as usize).is_none_or(Option::is_none)
    }

    /// The first rank that may be tried in the zone now (`None`: the zone is closed).
    pub fn open_rank(&self) -> Option<u32> {
        (0..self.ranks.len().max(1) as u32).find(|&r| self.is_open(r))
    }

    /// The rank a new VM in the zone gets: the first open one; when none is, the one whose
    /// backoff ends first (where the VM waits), rank 0 when the zone itself backs off.
    pub fn rank(&self) -> u32 {
        if let Some(r) = self.open_rank() {
            return r;
        }
        if self.backoff.is_some() {
            return 0;
        }
        let ends = |r: usize| self.ranks[r].as_ref().map(|b| b.until);
        (0..self.ranks.len()).min_by_key(|&r| (ends(r), r)).unwrap_or(0) as u32
    }
}

/// The scopes `c`'s new VMs (Spot ones when `spot`) wait on, zone by zone in its order, as
/// [`Scope::of`] names them for a VM: those of any VM there (the zone, and what a refusal backs
/// off when it is narrower: `Scope::refusal` without a rank), and each rank's (`Scope::refusal`
/// of its machine type; none for a Config without fallbacks).
fn scopes(c: &Config, spot: bool) -> Vec<(Vec<Scope>, Vec<Scope>)> {
    let project = c.attributes.project.as_str();
    let ranks = if c.has_ranks() { c.ranks() } else { 0 };
    let zone_scopes = |zone: &str| {
        let whole = Scope(project.to_owned(), zone.to_owned());
        let refused = Scope::refusal(project, zone, None, spot);
        match ranks > 0 || refused == whole {
            true => vec![whole],
            false => vec![whole, refused],
        }
    };
    let rank_scopes = |zone: &str| -> Vec<Scope> {
        (0..ranks)
            .map(|r| {
                let t = c.machine_type_of(r).unwrap_or_default().replace("{{.Zone}}", zone);
                Scope::refusal(project, zone, Some(&t), spot)
            })
            .collect()
    };
    c.zone_names().into_iter().map(|zone| (zone_scopes(zone), rank_scopes(zone))).collect()
}

/// The backoffs `c`'s new VMs (Spot ones when `spot`) meet at `now`, per zone (in its order)
/// and rank (one read). A zone's own backoff is the latest of those every VM there waits on.
pub async fn grid(
    store: &dyn Store,
    c: &Config,
    spot: bool,
    now: DateTime<Utc>,
) -> Result<Vec<ZoneRanks>, TaskError> {
    let scopes = scopes(c, spot);
    let pairs: Vec<(&str, &str)> =
        scopes.iter().flat_map(|(own, ranks)| own.iter().chain(ranks)).map(Scope::pair).collect();
    let mut found = store.backoffs(&pairs).await?.into_iter().map(|b| b.filter(|b| b.until > now));
    let mut out = Vec::new();
    for (zone, (own, ranks)) in c.zone_names().into_iter().zip(&scopes) {
        let backoff = found.by_ref().take(own.len()).flatten().max_by_key(|b| b.until);
        let ranks = found.by_ref().take(ranks.len()).collect();
        out.push(ZoneRanks { zone: zone.to_owned(), backoff, ranks });
    }
    Ok(out)
}

/// True when `vm` (no instance; the caller knows no insert of it is in flight) is better made
/// again at once: its zone, or its rank there, backs off while another (zone, rank) of its
/// Config does not.
pub async fn elsewhere(ctx: &Env, vm: &Vm) -> Result<bool, TaskError> {
    if vm.instance.is_some() {
        return Ok(false);
    }
    let Some(cfg) = ctx.ports.store.config(&vm.config).await? else { return Ok(false) };
    closed(&*ctx.ports.store, &cfg.value.config, vm, ctx.now()).await
}

/// [`elsewhere`]'s rule, given `vm`'s Config `c`.
pub async fn closed(store: &dyn Store, c: &Config, vm: &Vm, now: DateTime<Utc>) -> Result<bool, TaskError> {
    if vm.instance.is_some() || (c.zones.len() < 2 && vm.rank.is_none()) {
        return Ok(false);
    }
    let grid = grid(store, c, vm.attributes.preemptible(), now).await?;
    // A rank the Config no longer has is as good as closed.
    let own = grid.iter().find(|z| z.zone == vm.zone()).is_none_or(|z| match vm.rank {
        Some(r) => r >= c.ranks() || !z.is_open(r),
        None => z.backoff.is_some(),
    });
    Ok(own && grid.iter().any(|z| z.open_rank().is_some()))
}

/// The ranks of `c` (a Config with fallback machine types; none for another) as status shows
/// them at `now`, from `grid` (as [`grid`] read it): VMs and connected bots per rank from the
/// store's sums, placements from its counters, the active backoffs of each rank's machine type
/// per zone.
pub async fn status(
    store: &dyn Store,
    c: &Config,
    grid: &[ZoneRanks],
    now: DateTime<Utc>,
) -> Result<Vec<RankStatus>, TaskError> {
    if !c.has_ranks() {
        return Ok(Vec::new());
    }
    let sums = crate::records::counts::rank_sums(store, &c.prefix).await?;
    let mut out = Vec::new();
    for rank in 0..c.ranks() {
        let n = sums.get(&rank).map(|s| Counts::from_sums(0, s, now)).unwrap_or_default();
        let backoffs = grid
            .iter()
            .filter_map(|z| {
                let b = z.ranks.get(rank as usize).cloned().flatten()?;
                Some(Backoff { zone: z.zone.clone(), ..b })
            })
            .collect();
        out.push(RankStatus {
            rank,
            machine_type: short_machine_type(c.machine_type_of(rank).unwrap_or_default()).to_owned(),
            vms: sums.get(&rank).map_or(0, |s| s[0].clamp(0, i64::from(u32::MAX)) as u32),
            connected: n.connected,
            placed: store.counter(&c.prefix, &counters::placed(rank)).await?,
            backoffs,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
