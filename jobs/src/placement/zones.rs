//! Where a multi-zone Config's new VMs go, in one place: each to the zone with the most
//! headroom by weight (its weight's share of the VMs the Config wants, less the VMs it holds
//! that are not draining, read from the store's per-zone sums). A zone closed for quota or
//! stockout (backed off, or every rank of its machine types backed off there: `ranks`) is
//! skipped, so creation moves to the other zones at once; zones of weight 0 are used only while
//! every weighted zone is closed. A batch of VMs made together is placed at once ([`places`]:
//! each placement counts for the next), so they spread rather than all read the same counts; a
//! VM keeps its zone (and rank) for its incarnation, and one not yet sent to Compute whose zone
//! or rank gets backed off is made again elsewhere (`ranks::elsewhere`).

use std::collections::BTreeMap;

use crate::config::Config;
use crate::env::Env;
use crate::error::TaskError;
use crate::model::{ConfigRecord, Sums};
use crate::placement::ranks::ZoneRanks;

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
    let sums: BTreeMap<String, Sums> =
        crate::records::counts::zone_sums(&*ctx.ports.store, &c.prefix).await?;
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

/// Where the next `n` VMs made for `rec` go, in order: one decision for them all, each
/// placement counting for the next (one read of the backoffs and one of the zone sums; none for
/// a Config with one zone and no fallbacks): the zone with the most headroom ([`place`]), and
/// the rank that zone gives a new VM (`ranks::ZoneRanks::rank`; `None` for a Config without
/// fallback machine types).
pub async fn places(
    ctx: &Env,
    rec: &ConfigRecord,
    n: usize,
) -> Result<Vec<(String, Option<u32>)>, TaskError> {
    let c = &rec.config;
    if c.zones.len() < 2 && !c.has_ranks() {
        return Ok(vec![(c.zone_names()[0].to_owned(), None); n]);
    }
    let grid =
        crate::placement::ranks::grid(&*ctx.ports.store, c, rec.makes_spot(ctx.now()), ctx.now()).await?;
    let zones: Vec<String> = match c.zones.len() {
        0 | 1 => vec![c.zone_names()[0].to_owned(); n],
        _ => {
            let mut rooms = rooms(ctx, c, &grid).await?;
            place(&mut rooms, rec.wanted_len(), n).into_iter().map(str::to_owned).collect()
        }
    };
    let rank_in =
        |zone: &str| c.has_ranks().then(|| grid.iter().find(|g| g.zone == zone).map_or(0, |g| g.rank()));
    Ok(zones
        .into_iter()
        .map(|zone| {
            let rank = rank_in(&zone);
            (zone, rank)
        })
        .collect())
}

#[cfg(test)]
mod tests;
