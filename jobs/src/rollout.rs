//! Rolling updates, in one place. When a Config's instance attributes change (image, machine
//! type, metadata, zones, …) and its update mode is `rolling`, the Config is marked in the same
//! write. While marked, it wants `max_surge` VMs more than its amount (made from the new
//! attributes), and each `expand_config` run retires VMs made from older attributes while at
//! least `amount - max_unavailable` bots stay connected: drained like any other (the bot
//! finishes its task, then the instance goes), each index made again from the new attributes.
//! Outdated VMs whose bot is not connected go at once (they serve nothing). When none is left and
//! the amount is served by new VMs, the mark goes, and with it the surge. A change of the amount
//! alone rolls nothing.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::{Config, UpdateMode};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{ConfigRecord, Vm};
use crate::ports::store::Expect;

/// A rolling update going on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rollout {
    /// Since when.
    pub since: DateTime<Utc>,
    /// VMs made from the new attributes (at the last look).
    pub updated: u32,
    /// VMs made from older ones, not yet retired (at the last look).
    pub outdated: u32,
}

/// True when `vm` was made from other instance attributes than `c` has now.
pub fn outdated(c: &Config, vm: &Vm) -> bool {
    !c.is_static() && (!c.zone_names().contains(&vm.zone()) || vm.attributes != c.attributes_in(vm.zone()))
}

/// The rollout mark of a Config record replacing `old` with `new`: a new one when the instance
/// attributes (or zones) change and the update is rolling, else `old`'s (one going on goes on).
pub fn changed(old: &ConfigRecord, new: &Config, now: DateTime<Utc>) -> Option<Rollout> {
    let o = &old.config;
    let other = o.attributes != new.attributes || o.zones != new.zones;
    let rolling = new.update.mode == UpdateMode::Rolling && !new.is_static();
    match (other && rolling && !old.revision.is_empty(), &old.rollout) {
        (true, _) => Some(Rollout { since: now, updated: 0, outdated: 0 }),
        (false, r) if rolling => r.clone(),
        _ => None,
    }
}

/// One step of Config `prefix`'s rollout (it is marked): retires what may go now, records the
/// progress, and clears the mark when no outdated VM is left. `ids`: its VM ids as the caller
/// read them. Returns whether the rollout goes on. Reads every VM record of the Config.
pub async fn step(ctx: &Ctx, prefix: &str, ids: &[String]) -> Result<bool, TaskError> {
    let Some(cur) = ctx.store.config(prefix).await? else { return Ok(false) };
    let Some(mark) = cur.value.rollout.clone() else { return Ok(false) };
    let c = &cur.value.config;
    let (mut healthy, mut updated, mut updated_up, mut retiring) = (0u32, 0u32, 0u32, 0u32);
    let (mut serving, mut idle) = (Vec::new(), Vec::new());
    for id in ids {
        let Some(v) = ctx.store.vm(id).await? else { continue };
        let vm = v.value;
        let up = vm.serving();
        if !outdated(c, &vm) {
            updated += u32::from(!vm.drained);
            // Those that stay once the surge goes.
            updated_up += u32::from(up && vm.index < cur.value.current_amount);
            healthy += u32::from(up);
        } else if vm.drained {
            retiring += 1;
        } else {
            if up {
                healthy += 1;
                serving.push(vm);
            } else {
                idle.push(vm);
            }
        }
    }
    let outdated_left = u32::try_from(serving.len() + idle.len()).unwrap_or(u32::MAX);
    let progress = Rollout { updated, outdated: outdated_left, ..mark.clone() };
    // Done once every old VM is gone and the amount is served by new ones: only then may the
    // surge go (before, its bots stand in for those still on their way).
    let done = outdated_left == 0 && retiring == 0 && updated_up >= cur.value.current_amount;
    let rec = ConfigRecord { rollout: (!done).then_some(progress), ..cur.value.clone() };
    if rec != cur.value {
        if !ctx.store.put_config(&rec, Expect::Version(cur.version)).await? {
            return Ok(true); // changed under us: the next look
        }
        if done {
            let secs = (ctx.now() - mark.since).num_seconds();
            tracing::info!(config = %prefix, seconds = secs, vms = updated, "rolling update done: every VM has the new attributes");
            return Ok(false);
        }
    }
    // Retire: outdated VMs that serve nothing at once; serving ones while enough stay connected.
    let floor = cur.value.current_amount.saturating_sub(c.update.max_unavailable);
    let may = healthy.saturating_sub(floor) as usize;
    serving.sort_by_key(|v| v.index);
    let chosen: Vec<Vm> = idle.into_iter().chain(serving.into_iter().take(may)).collect();
    if !chosen.is_empty() {
        tracing::info!(config = %prefix, retiring = chosen.len(), outdated = outdated_left, updated, healthy, "rolling update: retiring VMs made from older attributes");
    }
    for vm in &chosen {
        crate::tasks::drain_vm::drain(ctx, vm).await?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::{CreateVm, ExpandConfig};
    use crate::testing::created;

    fn up(now: DateTime<Utc>) -> impl FnOnce(&mut Vm) {
        move |v| {
            created(now)(v);
            v.connected = Some(now);
        }
    }

    async fn expand(ctx: &Ctx) {
        crate::tasks::expand_config::run(ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    }

    async fn drained(ctx: &Ctx, ids: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        for id in ids {
            if ctx.store.vm(id).await.unwrap().is_some_and(|v| v.value.drained) {
                out.push((*id).to_owned());
            }
        }
        out
    }

    #[tokio::test]
    async fn a_new_image_rolls_one_surge_vm_at_a_time_and_an_amount_change_rolls_nothing() {
        let (ctx, _) = Ctx::test();
        let mut c = crate::testing::config("linux", 2);
        crate::operate::apply(&ctx, c.clone(), "t").await.unwrap();
        for id in ["linux-0", "linux-1"] {
            ctx.seed_vm(id, up(ctx.now())).await;
        }
        c.amount.max = 3;
        crate::operate::apply(&ctx, c.clone(), "t").await.unwrap();
        assert!(ctx.store.config("linux").await.unwrap().unwrap().value.rollout.is_none(), "amount only");
        c.attributes.disk[0].image = "global/images/y".into();
        crate::operate::apply(&ctx, c.clone(), "t").await.unwrap();
        let rec = ctx.store.config("linux").await.unwrap().unwrap().value;
        assert!(rec.rollout.is_some() && rec.wants(2) && !rec.wants(3), "amount 2 plus a surge of 1");
        ctx.finished::<ExpandConfig>().await;
        expand(&ctx).await;
        assert_eq!(ctx.finished::<CreateVm>().await, [CreateVm { id: "linux-2".into() }], "the surge");
        assert!(drained(&ctx, &["linux-0", "linux-1"]).await.is_empty(), "none goes before it connects");
        // The surge VM (new attributes) connects: one old VM may go.
        ctx.seed_vm("linux-2", |v| {
            up(ctx.now())(v);
            v.attributes = c.attributes_in("z");
        })
        .await;
        expand(&ctx).await;
        assert_eq!(drained(&ctx, &["linux-0", "linux-1"]).await, ["linux-0"]);
        let r = ctx.store.config("linux").await.unwrap().unwrap().value.rollout.unwrap();
        assert_eq!((r.updated, r.outdated), (1, 2));
        expand(&ctx).await;
        assert_eq!(drained(&ctx, &["linux-1"]).await, Vec::<String>::new(), "one at a time");
        // The last old VM on its way out and the first one's replacement not connected yet: the
        // surge stays (its bot stands in for them).
        let v0 = ctx.store.vm("linux-0").await.unwrap().unwrap();
        ctx.store.delete_vm("linux-0", v0.version).await.unwrap();
        ctx.seed_vm("linux-0", |v| {
            created(ctx.now())(v);
            v.attributes = c.attributes_in("z");
        })
        .await;
        let v1 = ctx.store.vm("linux-1").await.unwrap().unwrap().value;
        crate::tasks::drain_vm::drain(&ctx, &v1).await.unwrap();
        expand(&ctx).await;
        let r = ctx.store.config("linux").await.unwrap().unwrap().value.rollout;
        assert_eq!(
            r.map(|r| (r.updated, r.outdated)),
            Some((2, 0)),
            "not done before new VMs serve the amount"
        );
        // Old VMs all gone, two new ones up, but one of them is the surge: not done either.
        let v1 = ctx.store.vm("linux-1").await.unwrap().unwrap();
        ctx.store.delete_vm("linux-1", v1.version).await.unwrap();
        ctx.seed_vm("linux-1", |v| {
            created(ctx.now())(v);
            v.attributes = c.attributes_in("z");
        })
        .await;
        crate::tasks::update_vm(&ctx, "linux-0", |v| {
            v.connected = Some(ctx.now());
            true
        })
        .await
        .unwrap();
        expand(&ctx).await;
        let rec = ctx.store.config("linux").await.unwrap().unwrap().value;
        assert!(rec.rollout.is_some(), "the surge serves for linux-1");
        // Both old VMs replaced by new ones: done, and the surge goes.
        for id in ["linux-0", "linux-1"] {
            let v = ctx.store.vm(id).await.unwrap().unwrap();
            ctx.store.delete_vm(id, v.version).await.unwrap();
            ctx.seed_vm(id, |v| {
                up(ctx.now())(v);
                v.attributes = c.attributes_in("z");
            })
            .await;
        }
        expand(&ctx).await;
        assert!(ctx.store.config("linux").await.unwrap().unwrap().value.rollout.is_none());
        ctx.finished::<crate::tasks::DrainVm>().await;
        expand(&ctx).await;
        assert_eq!(
            ctx.finished::<crate::tasks::DrainVm>().await,
            [crate::tasks::DrainVm { id: "linux-2".into() }]
        );
    }
}
