//! Where a multi-zone Config's new VMs go, in one place: each to the zone with the most
//! headroom by weight (its weight's share of the VMs the Config wants, less the VMs it holds
//! that are not draining, read from the store's per-zone sums). A zone backed off for quota or
//! stockout is skipped, so creation moves to the other zones at once; zones of weight 0 are
//! used only while every weighted zone backs off. `expand_config` places a whole batch at once
//! ([`place_batch`]: each placement counts for the next), so `create_vm` tasks running together
//! do not all read the same counts; a VM keeps its zone for its incarnation, and one not yet sent
//! to Compute whose zone gets backed off is made again elsewhere ([`elsewhere`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::env::Env;
use crate::error::TaskError;
use crate::model::{Backoff, ConfigRecord, Sums, Vm};
use crate::ports::store::Store;

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

/// The active backoff of each of `c`'s zones, in its order (one read).
pub async fn backoffs(
    store: &dyn Store,
    c: &Config,
    now: DateTime<Utc>,
) -> Result<Vec<Option<Backoff>>, TaskError> {
    let project = c.attributes.project.as_str();
    let scopes: Vec<(&str, &str)> = c.zones.iter().map(|z| (project, z.zone.as_str())).collect();
    Ok(store.backoffs(&scopes).await?.into_iter().map(|b| b.filter(|b| b.until > now)).collect())
}

/// The rooms of `c`'s zones now: VMs per zone from the store's zone sums, and `backoffs` (as
/// [`backoffs`] read them).
async fn rooms<'a>(
    ctx: &Env,
    c: &'a Config,
    backoffs: Vec<Option<Backoff>>,
) -> Result<Vec<Room<'a>>, TaskError> {
    let sums: BTreeMap<String, Sums> = crate::counts::zone_sums(&*ctx.store, &c.prefix).await?;
    Ok(c.zones
        .iter()
        .zip(backoffs)
        .map(|(z, b)| Room {
            zone: &z.zone,
            weight: z.weight,
            vms: sums.get(&z.zone).map_or(0, |s| (s[0] - s[4]).max(0)),
            backed_off: b.is_some(),
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
    let mut rooms = rooms(ctx, c, backoffs(&*ctx.store, c, ctx.now()).await?).await?;
    let zones = place(&mut rooms, rec.wanted_len(), ids.len());
    let placed: Vec<(String, String)> =
        ids.iter().cloned().zip(zones.into_iter().map(str::to_owned)).collect();
    Ok(ctx.store.set_placements(&c.prefix, &placed).await?)
}

/// The zone of new VM `id` of `rec`: where `expand_config` placed it, unless that zone has backed
/// off since (or it was not placed: then by the same rule, now). The placement is taken as it is
/// read: a run that fails after it decides again, from the counts. (VMs whose placed zone backs
/// off all decide from the same counts, so they may go to one zone together; the next batch
/// evens it out.)
pub async fn pick(ctx: &Env, rec: &ConfigRecord, id: &str) -> Result<String, TaskError> {
    let c = &rec.config;
    if c.zones.len() < 2 {
        return Ok(c.zone_names()[0].to_owned());
    }
    let placed = ctx.store.take_placement(&c.prefix, id).await?;
    let backoffs = backoffs(&*ctx.store, c, ctx.now()).await?;
    // Placed in a zone that does not back off: no count to read.
    if let Some(placed) = placed
        && c.zones.iter().zip(&backoffs).any(|(z, b)| z.zone == placed && b.is_none())
    {
        return Ok(placed);
    }
    let mut rooms = rooms(ctx, c, backoffs).await?;
    Ok(place(&mut rooms, rec.wanted_len(), 1)[0].to_owned())
}

/// True when `vm` (no instance; the caller knows no insert of it is in flight) is better made
/// again in another zone: its Config has several zones, its own backs off and another does not.
pub async fn elsewhere(ctx: &Env, vm: &Vm) -> Result<bool, TaskError> {
    if vm.instance.is_some() {
        return Ok(false);
    }
    let Some(cfg) = ctx.store.config(&vm.config).await? else { return Ok(false) };
    let c = &cfg.value.config;
    if c.zones.len() < 2 {
        return Ok(false);
    }
    let backoffs = backoffs(&*ctx.store, c, ctx.now()).await?;
    let mut zones = c.zones.iter().zip(&backoffs);
    let own_backs_off = zones.clone().any(|(z, b)| z.zone == vm.zone() && b.is_some());
    Ok(own_backs_off && zones.any(|(z, b)| z.zone != vm.zone() && b.is_none()))
}

#[cfg(test)]
mod tests;
