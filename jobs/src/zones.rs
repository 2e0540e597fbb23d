//! Where a multi-zone Config's new VM goes, in one place. Each index has a zone in a sequence
//! that spreads indexes by weight (weights 2 and 1: a, b, a, a, b, a, …), so a pool fills its
//! zones by weight with no count to read; a zone backed off for quota or stockout is skipped for
//! the next one in the sequence that is not, so creation moves to the other zones at once. A VM
//! keeps its zone for its incarnation; one not yet sent to Compute whose zone gets backed off
//! is made again elsewhere ([`elsewhere`]).

use crate::backoff::Scope;
use crate::config::Config;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::Vm;

/// The zones of `c` in the order index `index` tries them: its own first (by the weighted
/// sequence), then the rest of the sequence.
pub fn order(c: &Config, index: u32) -> Vec<&str> {
    if c.zones.is_empty() {
        return c.zone_names();
    }
    let seq = sequence(c);
    let start = index as usize % seq.len().max(1);
    let mut out: Vec<&str> = Vec::with_capacity(c.zones.len());
    for z in seq[start..].iter().chain(&seq[..start]) {
        if !out.contains(z) {
            out.push(z);
        }
    }
    // Zones of weight 0 come last: only when every other one is backed off.
    out.extend(c.zones.iter().map(|z| z.zone.as_str()).filter(|z| !seq.contains(z)));
    out
}

/// One cycle of the smooth weighted round robin over the zones (length: the sum of weights,
/// capped so a cycle stays small).
fn sequence(c: &Config) -> Vec<&str> {
    let weights: Vec<i64> = c.zones.iter().map(|z| i64::from(z.weight.min(1000))).collect();
    let total: i64 = weights.iter().sum();
    let mut current = vec![0i64; weights.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (cur, w) in current.iter_mut().zip(&weights) {
            *cur += w;
        }
        let best = (0..weights.len()).max_by_key(|&i| (current[i], std::cmp::Reverse(i))).unwrap_or(0);
        current[best] -= total;
        out.push(c.zones[best].zone.as_str());
    }
    out
}

/// The zone of a new VM of `c` with index `index`: the first of its [`order`] not backed off
/// (all backed off: its own, where it waits for the backoff).
pub async fn pick(ctx: &Ctx, c: &Config, index: u32) -> Result<String, TaskError> {
    let order = order(c, index);
    if order.len() == 1 {
        return Ok(order[0].to_owned());
    }
    let project = c.attributes.project.as_str();
    let scopes: Vec<(&str, &str)> = order.iter().map(|z| (project, *z)).collect();
    let now = ctx.now();
    let found = ctx.store.backoffs(&scopes).await?;
    let free = order.iter().zip(found).find(|(_, b)| b.as_ref().is_none_or(|b| b.until <= now));
    Ok(free.map_or(order[0], |(z, _)| *z).to_owned())
}

/// True when `vm` (no instance; the caller knows no insert of it is in flight) is better made
/// again in another zone: its Config has several zones, its own is backed off and another is not.
pub async fn elsewhere(ctx: &Ctx, vm: &Vm) -> Result<bool, TaskError> {
    if vm.instance.is_some() {
        return Ok(false);
    }
    let Some(cfg) = ctx.store.config(&vm.config).await? else { return Ok(false) };
    let c = &cfg.value.config;
    if c.zones.len() < 2 || crate::backoff::active(ctx, &Scope::zone(vm)).await?.is_none() {
        return Ok(false);
    }
    Ok(pick(ctx, c, vm.index).await? != vm.zone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ZoneWeight;

    fn multi(weights: &[(&str, u32)]) -> Config {
        let mut c = crate::testing::config("linux", 1);
        c.attributes.zone.clear();
        c.zones = weights.iter().map(|(z, w)| ZoneWeight { zone: (*z).into(), weight: *w }).collect();
        c
    }

    #[test]
    fn indexes_spread_over_the_zones_by_weight() {
        let c = multi(&[("a", 2), ("b", 1)]);
        let firsts: Vec<&str> = (0..6).map(|i| order(&c, i)[0]).collect();
        assert_eq!(firsts, ["a", "b", "a", "a", "b", "a"]);
        assert_eq!(order(&c, 1), ["b", "a"]);
        let c = multi(&[("a", 1), ("b", 0), ("c", 1)]);
        assert_eq!(order(&c, 0), ["a", "c", "b"], "weight 0 last");
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        assert_eq!(order(&crate::testing::config("linux", 1), 7), ["z"], "one zone");
    }

    #[tokio::test]
    async fn a_backed_off_zone_is_skipped_for_the_next_and_a_vm_waiting_there_moves() {
        let (ctx, _) = Ctx::test();
        let c = multi(&[("a", 1), ("b", 1)]);
        assert_eq!(pick(&ctx, &c, 0).await.unwrap(), "a");
        crate::backoff::hit(&ctx, &Scope("p".into(), "a".into()), "ZONE_RESOURCE_POOL_EXHAUSTED")
            .await
            .unwrap();
        assert_eq!(pick(&ctx, &c, 0).await.unwrap(), "b");
        assert_eq!(pick(&ctx, &c, 1).await.unwrap(), "b");
        crate::backoff::hit(&ctx, &Scope("p".into(), "b".into()), "QUOTA_EXCEEDED").await.unwrap();
        assert_eq!(pick(&ctx, &c, 0).await.unwrap(), "a", "all backed off: its own");
        crate::backoff::clear(&ctx, &Scope("p".into(), "b".into())).await.unwrap();

        let mut rec = ctx.store.config("linux").await.unwrap();
        assert!(rec.is_none());
        ctx.seed_config("linux", 2).await;
        rec = ctx.store.config("linux").await.unwrap();
        let mut r = rec.unwrap();
        r.value.config = c;
        ctx.store.put_config(&r.value, crate::ports::store::Expect::Version(r.version)).await.unwrap();
        let waiting = ctx.seed_vm("linux-0", |v| v.attributes.zone = "a".into()).await;
        assert!(elsewhere(&ctx, &waiting).await.unwrap(), "a is backed off, b is not");
        let in_b = ctx.seed_vm("linux-1", |v| v.attributes.zone = "b".into()).await;
        assert!(!elsewhere(&ctx, &in_b).await.unwrap());
    }

    #[tokio::test]
    async fn a_stockout_in_one_zone_makes_the_vm_again_in_another_at_once() {
        use crate::ports::compute::ComputeError;
        use crate::tasks::{CreateInstance, CreateVm, ExpandConfig};
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 2).await;
        let r = ctx.store.config("linux").await.unwrap().unwrap();
        let rec = crate::model::ConfigRecord { config: multi(&[("a", 1), ("b", 1)]), ..r.value };
        ctx.store.put_config(&rec, crate::ports::store::Expect::Version(r.version)).await.unwrap();
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
        assert!(crate::backoff::active(&ctx, &Scope("p".into(), "a".into())).await.unwrap().is_some());
        crate::tasks::create_vm::run(&ctx, CreateVm { id: "linux-0".into() }).await.unwrap();
        let again = ctx.store.vm("linux-0").await.unwrap().unwrap().value;
        assert_eq!(again.zone(), "b");
        assert_ne!(again.hostname, vm.hostname, "a new incarnation");
    }
}
