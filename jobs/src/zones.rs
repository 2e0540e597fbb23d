//! Where a multi-zone Config's new VMs go, in one place: each to the zone with the most
//! headroom by weight (its weight's share of the VMs the Config wants, less the VMs it holds
//! that are not draining, read from the store's per-zone sums). A zone closed for quota or
//! stockout (backed off, or every rank of its machine types backed off there: `ranks`) is
//! skipped, so creation moves to the other zones at once; zones of weight 0 are used only while
//! every weighted zone is closed. `expand_config` places a whole batch at once ([`place_batch`]:
//! each placement counts for the next), so `create_vm` tasks running together do not all read
//! the same counts; a VM keeps its zone (and rank) for its incarnation, and one not yet sent to
//! Compute whose zone or rank gets backed off is made again elsewhere (`ranks::elsewhere`).

use std::collections::BTreeMap;

use crate::config::Config;
use crate::env::Env;
use crate::error::TaskError;
use crate::model::{ConfigRecord, Sums};
use crate::ranks::ZoneRanks;

/// A zone as placement sees it: its weight, the VMs it holds, whether it backs off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Room<'a> {
    /// The zone.
    pub zone: &'a str,
    /// Its weight.
    pub weight: u32,
    /// Its VMs that are not draining (placed ones included, as they are placed).
    pub vms: i64,
    /// True while it backs off.
    pub backed_off: bool,
}

/// The zones of `n` new VMs of a Config that wants `wanted` VMs over `rooms`: one at a time to
/// the zone with the most headroom (`wanted × weight / Σ weights − vms`; ties to the first
/// listed), each placement counting for the next. Zones that back off are skipped; weight-0 zones
/// (by fewest VMs) are used only while every weighted zone backs off; when every zone backs off,
/// the one with the most headroom (where the VM waits for its backoff).
pub fn place<'a>(rooms: &mut [Room<'a>], wanted: usize, n: usize) -> Vec<&'a str> {
    let total: i64 = rooms.iter().map(|r| i64::from(r.weight)).sum::<i64>().max(1);
    let wanted = wanted as i64;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        // Scaled by Σ weights so the comparison stays in integers.
        let headroom = |r: &Room<'_>| wanted * i64::from(r.weight) - r.vms * total;
        let tier = |r: &Room<'_>| match (r.backed_off, r.weight) {
            (false, 1..) => 0,
            (false, 0) => 1,
            (true, _) => 2,
        };
        let best = (0..rooms.len()).min_by_key(|&i| (tier(&rooms[i]), -headroom(&rooms[i]), i));
        let Some(best) = best else { break };
        rooms[best].vms += 1;
        out.push(rooms[best].zone);
    }
    out
}

/// The rooms of `c`'s zones now: VMs per zone from the store's zone sums, and each zone closed
/// when `grid` (as `ranks::grid` read it) has no open rank there.
async fn rooms<'a>(ctx: &Env, c: &'a Config, grid: &[ZoneRanks]) -> Result<Vec<Room<'a>>, TaskError> {
    let sums: BTreeMap<String, Sums> = crate::counts::zone_sums(&*ctx.store, &c.prefix).await?;
    Ok(c.zones
        .iter()
        .zip(grid)
        .map(|(z, g)| Room {
            zone: &z.zone,
            weight: z.weight,
            vms: sums.get(&z.zone).map_or(0, |s| (s[0] - s[4]).max(0)),
            backed_off: g.open_rank().is_none(),
        })
        .collect())
}

/// Places the VMs `ids` `expand_config` is about to create for `rec` and records where (one
/// decision for the batch); nothing for a Config with one zone.
pub async fn place_batch(ctx: &Env, rec: &ConfigRecord, ids: &[String]) -> Result<(), TaskError> {
    let c = &rec.config;
    if c.zones.len() < 2 || ids.is_empty() {
        return Ok(());
    }
    let grid = crate::ranks::grid(&*ctx.store, c, rec.makes_spot(ctx.now()), ctx.now()).await?;
    let mut rooms = rooms(ctx, c, &grid).await?;
    let zones = place(&mut rooms, rec.wanted_len(), ids.len());
    let placed: Vec<(String, String)> =
        ids.iter().cloned().zip(zones.into_iter().map(str::to_owned)).collect();
    Ok(ctx.store.set_placements(&c.prefix, &placed).await?)
}

/// The zone and rank (`None` for a Config without fallback machine types) of new VM `id` of
/// `rec`: the zone `expand_config` placed it in, unless that zone has closed since (or it was not
/// placed: then by the same rule, now), and the rank that zone gives a new VM
/// (`ranks::ZoneRanks::rank`). The placement is taken as it is read: a run that fails after it
/// decides again, from the counts. (VMs whose placed zone closes all decide from the same counts,
/// so they may go to one zone together; the next batch evens it out.)
pub async fn pick(ctx: &Env, rec: &ConfigRecord, id: &str) -> Result<(String, Option<u32>), TaskError> {
    let c = &rec.config;
    if c.zones.len() < 2 && !c.has_ranks() {
        return Ok((c.zone_names()[0].to_owned(), None));
    }
    let placed = match c.zones.len() {
        0 | 1 => None,
        _ => ctx.store.take_placement(&c.prefix, id).await?,
    };
    let grid = crate::ranks::grid(&*ctx.store, c, rec.makes_spot(ctx.now()), ctx.now()).await?;
    let rank_in =
        |zone: &str| c.has_ranks().then(|| grid.iter().find(|g| g.zone == zone).map_or(0, |g| g.rank()));
    if c.zones.len() < 2 {
        let zone = c.zone_names()[0];
        return Ok((zone.to_owned(), rank_in(zone)));
    }
    // Placed in a zone that is open: no count to read.
    if let Some(placed) = placed
        && grid.iter().any(|g| g.zone == placed && g.open_rank().is_some())
    {
        let rank = rank_in(&placed);
        return Ok((placed, rank));
    }
    let mut rooms = rooms(ctx, c, &grid).await?;
    let zone = place(&mut rooms, rec.wanted_len(), 1)[0].to_owned();
    let rank = rank_in(&zone);
    Ok((zone, rank))
}

#[cfg(test)]
mod tests;
