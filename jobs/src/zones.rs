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
use crate::ctx::Ctx;
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
    ctx: &Ctx,
    c: &'a Config,
    backoffs: Vec<Option<Backoff>>,
) -> Result<Vec<Room<'a>>, TaskError> {
    let sums: BTreeMap<String, Sums> = crate::status::zone_sums(&*ctx.store, &c.prefix).await?;
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
pub async fn place_batch(ctx: &Ctx, rec: &ConfigRecord, ids: &[String]) -> Result<(), TaskError> {
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
pub async fn pick(ctx: &Ctx, rec: &ConfigRecord, id: &str) -> Result<String, TaskError> {
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
pub async fn elsewhere(ctx: &Ctx, vm: &Vm) -> Result<bool, TaskError> {
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
mod tests {
    use super::*;
    use crate::backoff::Scope;

    fn multi(weights: &[(&str, u32)]) -> Config {
        crate::testing::zoned(crate::testing::config("linux", 1), weights)
    }

    fn room(zone: &str, weight: u32, vms: i64, backed_off: bool) -> Room<'_> {
        Room { zone, weight, vms, backed_off }
    }

    #[test]
    fn each_new_vm_goes_to_the_zone_with_the_most_headroom_by_weight() {
        // An empty pool of 6 over weights 2:1 fills to 4 and 2.
        let mut rooms = [room("a", 2, 0, false), room("b", 1, 0, false)];
        let zones = place(&mut rooms, 6, 6);
        assert_eq!(zones, ["a", "a", "a", "b", "a", "b"]);
        assert_eq!((rooms[0].vms, rooms[1].vms), (4, 2));
        // Holes are filled where they are, whatever the index: b lost two VMs.
        let mut rooms = [room("a", 2, 4, false), room("b", 1, 0, false)];
        assert_eq!(place(&mut rooms, 6, 2), ["b", "b"]);
        // A zone over its share (after a stockout elsewhere) gets nothing until the other catches
        // up; then both grow by weight.
        let mut rooms = [room("a", 1, 0, false), room("b", 1, 4, false)];
        assert_eq!(place(&mut rooms, 6, 4), ["a", "a", "a", "a"]);
        let mut rooms = [room("a", 1, 3, false), room("b", 1, 3, false)];
        assert_eq!(place(&mut rooms, 8, 2), ["a", "b"], "ties to the first listed");
    }

    #[test]
    fn backed_off_zones_are_skipped_and_weight_0_zones_are_the_last_resort() {
        let mut rooms = [room("a", 2, 0, true), room("b", 1, 3, false)];
        assert_eq!(place(&mut rooms, 6, 3), ["b", "b", "b"], "a backs off: b, past its share");
        let mut rooms = [room("a", 1, 0, true), room("spare", 0, 1, false), room("c", 0, 0, false)];
        assert_eq!(place(&mut rooms, 4, 3), ["c", "spare", "c"], "weight 0, fewest VMs first");
        let mut rooms = [room("a", 1, 0, false), room("spare", 0, 0, false)];
        assert_eq!(place(&mut rooms, 2, 3), ["a", "a", "a"], "never while a weighted zone is up");
        let mut rooms = [room("a", 1, 2, true), room("b", 1, 0, true)];
        assert_eq!(place(&mut rooms, 4, 1), ["b"], "all back off: most headroom, it waits there");
        assert!(place(&mut [], 4, 2).is_empty());
    }

    #[tokio::test]
    async fn a_batch_is_placed_at_once_and_a_placement_in_a_zone_backed_off_since_is_not_kept() {
        let (ctx, _) = Ctx::test();
        let rec = ctx.seed_config_with("linux", 4, |c| *c = multi(&[("a", 1), ("b", 1)])).await;
        ctx.seed_vm("linux-0", |v| v.attributes.zone = "a".into()).await;
        let ids: Vec<String> = (1..4).map(|i| format!("linux-{i}")).collect();
        place_batch(&ctx, &rec, &ids).await.unwrap();
        let mut picked = Vec::new();
        for id in &ids {
            picked.push(pick(&ctx, &rec, id).await.unwrap());
        }
        assert_eq!(picked, ["b", "a", "b"], "one decision for the batch: 2 and 2");
        // Taken once: a second pick decides again, from the counts (one VM in a, none in b).
        assert_eq!(pick(&ctx, &rec, "linux-1").await.unwrap(), "b");
        place_batch(&ctx, &rec, &ids[..1]).await.unwrap();
        crate::backoff::hit(&ctx, &Scope("test-project".into(), "b".into()), "ZONE_RESOURCE_POOL_EXHAUSTED")
            .await
            .unwrap();
        assert_eq!(pick(&ctx, &rec, "linux-1").await.unwrap(), "a", "b backs off since");
        let waiting = ctx.seed_vm("linux-2", |v| v.attributes.zone = "b".into()).await;
        assert!(elsewhere(&ctx, &waiting).await.unwrap(), "b backs off, a does not");
        let in_a = ctx.seed_vm("linux-3", |v| v.attributes.zone = "a".into()).await;
        assert!(!elsewhere(&ctx, &in_a).await.unwrap());
        crate::backoff::hit(&ctx, &Scope("test-project".into(), "a".into()), "QUOTA_EXCEEDED").await.unwrap();
        assert!(!elsewhere(&ctx, &waiting).await.unwrap(), "nowhere better");
        let one = crate::testing::config("linux", 1);
        let one = ConfigRecord { config: one, ..rec.clone() };
        assert_eq!(pick(&ctx, &one, "linux-0").await.unwrap(), "z", "one zone");
    }

    #[tokio::test]
    async fn a_stockout_in_one_zone_makes_the_vm_again_in_another_at_once() {
        use crate::ports::compute::ComputeError;
        use crate::tasks::{CreateInstance, CreateVm, ExpandConfig};
        let (ctx, f) = Ctx::test();
        ctx.seed_config_with("linux", 2, |c| *c = multi(&[("a", 1), ("b", 1)])).await;
        crate::tasks::create_vm::run(&ctx, CreateVm { id: "linux-0".into() }).await.unwrap();
        let vm = ctx.store.vm("linux-0").await.unwrap().unwrap().value;
        assert_eq!((vm.zone(), vm.attributes.machine_type.as_str()), ("a", "zones/a/machineTypes/e2-small"));
        let stockout =
            ComputeError::from_operation("ZONE_RESOURCE_POOL_EXHAUSTED", Some(503), "no room in a");
        f.compute.inserts.lock().unwrap().push_back(Err(stockout));
        ctx.taken::<CreateInstance>().await;
        let next =
            crate::tasks::create_instance::run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert_eq!(next, crate::tasks::Next::Done, "no wait for the backoff");
        assert!(ctx.store.vm("linux-0").await.unwrap().is_none(), "dropped: it had no instance");
        assert_eq!(ctx.taken::<ExpandConfig>().await.len(), 1, "made again at once");
        assert!(
            crate::backoff::active(&ctx, &Scope("test-project".into(), "a".into())).await.unwrap().is_some()
        );
        crate::tasks::create_vm::run(&ctx, CreateVm { id: "linux-0".into() }).await.unwrap();
        let again = ctx.store.vm("linux-0").await.unwrap().unwrap().value;
        assert_eq!(again.zone(), "b");
        assert_ne!(again.hostname, vm.hostname, "a new incarnation");
    }
}
