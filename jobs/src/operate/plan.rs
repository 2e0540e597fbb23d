//! `plan`: what applying a Config or an amount would do, reading only: the amount it would
//! target, and each VM's fate (created, drained, replaced now and how, recycled at the end of its
//! lifetime, kept), the fields it changes and whom each affects, why it could not be applied, and
//! what it would cost per hour and whether its tenant's budget holds it.
//! The fates are the rules the work follows ([`ConfigRecord::wants`], [`ConfigRecord::keeps`],
//! [`outdated`], a rollout's pace in [`crate::model::rollout_mark`]) asked of the record applying it
//! would write ([`super::configs::successor`]), never decided again here.

use std::collections::HashSet;

use serde_json::Value;

use crate::config::{Config, Usd};
use crate::ctx::Ctx;
use crate::fleet::rollout::Standing;
use crate::model::{
    Change, ConfigRecord, Plan, PlanBudget, PlanCost, PlanInput, Recycle, ReplacedBy, Replacement, Vm,
    outdated,
};
use crate::ports::store::VmIndex;
use crate::prices::Unpriced;
use crate::{model::rollout_mark::min_connected, model::rollout_mark::switch_batch};
use crate::{naming::parse_id, naming::vm_id};

use super::shared::{OpError, admit, by_index};

/// Dry run: what applying `input` to `prefix` would do, changing nothing. The amount is the one
/// `apply` then `set_amount` would leave: `input.amount`, else the current amount (0 for a new
/// Config), clamped by the amount rules of the Config it would have, now. NotFound when there
/// is no Config `prefix` and `input` brings none. Reads every VM record of the Config.
pub async fn plan(ctx: &Ctx, prefix: &str, mut input: PlanInput) -> Result<Plan, OpError> {
    let cur = ctx.ports.store.config(prefix).await?.map(|c| c.value);
    let mut problems = Vec::new();
    let mut changes = Vec::new();
    if let Some(c) = &mut input.config {
        if c.prefix != prefix {
            problems.push(format!("prefix: the Config names {:?}, not {prefix:?}", c.prefix));
        }
        let a = admit(ctx, c, cur.as_ref()).await?;
        problems.extend(a.invalid.iter().map(ToString::to_string));
        problems.extend(a.conflict);
        changes = diff(cur.as_ref().map(|r| &r.config), c);
        // Naming the default provider is no change of provider.
        let was = cur.as_ref().map(|r| ctx.providers.declared().resolve(&r.config.provider));
        changes.retain(|ch| {
            ch.field != "provider" || was.is_some_and(|w| w != ctx.providers.declared().resolve(&c.provider))
        });
    }
    // The Config it would have: the one given, else the current one, kept as it is.
    let (config, unchanged) = match (&input.config, &cur) {
        (Some(c), _) => (c, None),
        (None, Some(r)) => (&r.config, Some(r)),
        (None, None) => return Err(OpError::NotFound(format!("Config {prefix}"))),
    };
    let current = cur.as_ref().map(|r| r.current_amount);
    let paused = crate::safety::pause::paused(ctx, cur.as_ref()).await?;
    let mut plan = Plan {
        prefix: prefix.to_owned(),
        amount: current.unwrap_or(0),
        create: Vec::new(),
        drain: Vec::new(),
        warm: Vec::new(),
        replace: Vec::new(),
        recycle: Vec::new(),
        keep: Vec::new(),
        replacement: None,
        changes,
        problems,
        paused,
        cost: None,
    };
    if !plan.problems.is_empty() {
        // It could not be applied: say why, and nothing about VMs (its amount rules may not even
        // be computable, and its size may be anything).
        return Ok(plan);
    }
    if config.is_static() && input.amount.is_some() {
        return Err(crate::operate::managed_by_list(prefix, "amount"));
    }
    if config.demand.is_some() && input.amount.is_some() {
        return Err(super::shared::follows_demand(prefix));
    }
    // The record it would have, as `apply` would write it (a static pool's slots follow its list).
    let mut next = match unchanged {
        Some(r) => r.clone(),
        None => super::configs::successor(ctx, config, cur.as_ref(), true),
    };
    if !config.is_static() {
        next.current_amount = match config.demand {
            // The target its last reading of the work gives, in the new bounds.
            Some(_) => next.amount_at(ctx.now()),
            None => config.amount.at(input.amount.or(current).unwrap_or(0), ctx.now()),
        };
    }
    plan.amount = next.current_amount;
    if current != Some(plan.amount) {
        plan.changes.push(Change {
            field: "current_amount".into(),
            from: current.map_or(Value::Null, Value::from),
            to: plan.amount.into(),
            applies_to: Change::THE_POOL.into(),
        });
    }
    let ids = by_index(ctx.ports.store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await?);
    // One gone since the listing has nothing left to plan; one that does not decode is left out,
    // as listVms leaves it out.
    let (vms, seen) = crate::records::writes::vms_and_bots(ctx, &ids).await?;
    // Which VMs it keeps, as `expand_config` will choose them (idle first, a warm pool).
    let surplus = vms.iter().any(|v| !v.drained && !next.makes(v.index));
    let present: std::collections::BTreeSet<u32> = vms.iter().map(|v| v.index).collect();
    if crate::model::release::must_arrange(&next, surplus, &present, ctx.now()) {
        let a = crate::model::release::of_records(&next, &vms, &seen, ctx.now());
        (next.let_go, next.warm) = (a.let_go, a.warm);
    }
    // A VM past its lifetime is replaced unless a pause (or an open breaker) holds it.
    let held = crate::safety::pause::held(ctx, &next, None).await?.is_some();
    fates(ctx, &next, &vms, held, &mut plan);
    plan.cost = Some(cost(ctx, &next, plan.amount, plan.create.len()).await?);
    Ok(plan)
}

/// What Config record `next` costs now and would at `amount` running, and whether its tenant's
/// budget lets `creating` new VMs be made now (the rule `expand_config` applies: `spend::hold`).
async fn cost(ctx: &Ctx, next: &ConfigRecord, amount: u32, creating: usize) -> Result<PlanCost, OpError> {
    let now = ctx.now();
    let rates = ctx.catalog.rates(ctx.ports.store.as_ref(), now).await?;
    let ledger = crate::model::ledger::ledger(&ctx.ports.store.ledger(&next.config.prefix).await?, now);
    let (per_vm, unpriced) = match crate::spend::per_hour(&rates, next, now) {
        Ok(p) => (Some(Usd(p)), None),
        Err(Unpriced(why)) => (None, Some(why)),
    };
    let budget =
        crate::spend::hold(&*ctx.ports.store, &ctx.settings.trust, &rates, next, now).await?.map(|h| {
            PlanBudget {
                holds: h.room >= creating as u64,
                room: h.room.min(creating as u64),
                said: h.said().trim_start_matches("held by budget: ").to_owned(),
            }
        });
    Ok(PlanCost {
        now_per_hour: Usd(ledger.per_hour()),
        per_vm,
        planned_per_hour: per_vm.map(|p| Usd(p.0 * f64::from(amount))),
        unpriced,
        budget,
    })
}

/// Fills `plan`'s fates of Config record `next`'s VMs (`vms`, by index; `held`: replacing them is
/// held) and says whom its instance attribute and provider changes affect.
fn fates(ctx: &Ctx, next: &ConfigRecord, vms: &[Vm], held: bool, plan: &mut Plan) {
    let prefix = plan.prefix.clone();
    let providers = ctx.providers.declared();
    let now = ctx.now();
    let (mut rolled, mut switched, mut surged) = (false, false, Vec::new());
    // Where a rollout stands once `next` is written (counted only while it has one).
    let mut standing = Standing::default();
    for vm in vms {
        if next.rollout.is_some() {
            standing.add(vm, outdated(&next.config, vm), next.wants(vm.index) && !next.in_surge(vm.index));
        }
        let index = parse_id(&vm.id).filter(|(p, _)| *p == prefix).map(|(_, i)| i);
        match index {
            Some(i) if next.wants(i) && next.in_surge(i) => surged.push(vm.id.clone()),
            Some(i) if next.wants(i) => {
                if !next.keeps(vm, providers) {
                    switched = true;
                    plan.replace.push(vm.id.clone());
                } else if outdated(&next.config, vm) && next.rollout.is_some() {
                    rolled = true;
                    plan.replace.push(vm.id.clone());
                } else if vm.drained {
                    // Already on its way out: made again once it is gone.
                    plan.replace.push(vm.id.clone());
                } else if outdated(&next.config, vm) || (vm.past_deadline(now) && !held) {
                    // Past its lifetime: replaced now, unless held (`manage_bot`).
                    plan.recycle.push(Recycle { id: vm.id.clone(), at: vm.deadline() });
                } else {
                    plan.keep.push(vm.id.clone());
                }
            }
            Some(_) if next.keeps_warm(vm, providers, now) && !vm.drained => plan.warm.push(vm.id.clone()),
            _ => plan.drain.push(vm.id.clone()),
        }
    }
    let made: HashSet<&str> = vms.iter().map(|v| v.id.as_str()).collect();
    let missing = next.wanted().into_iter().filter(|i| !made.contains(vm_id(&prefix, *i).as_str()));
    for i in missing {
        match next.in_surge(i) {
            true => surged.push(vm_id(&prefix, i)),
            false => plan.create.push(vm_id(&prefix, i)),
        }
    }
    // The warm pool's new VMs: made, then kept warm.
    for id in next.warm.iter().map(|i| vm_id(&prefix, *i)).filter(|id| !made.contains(id.as_str())) {
        plan.create.push(id.clone());
        plan.warm.push(id);
    }
    // A surge is made only while a rollout goes on; one done ends at its next step
    // (`crate::fleet::rollout::step`, by the same test) and an existing surge goes.
    let rolling = next.rollout.is_some() && !standing.done(next.current_amount);
    if !rolling {
        let made_surge = surged.into_iter().filter(|id| made.contains(id.as_str()));
        plan.drain.extend(made_surge);
        surged = Vec::new();
    }
    let (amount, update) = (next.current_amount, &next.config.update);
    plan.replacement = match (switched, rolling) {
        (true, _) => Some(Replacement {
            by: ReplacedBy::ProviderChange,
            at_once: switch_batch(amount),
            surge: surged,
            min_connected: None,
        }),
        (false, true) => Some(Replacement {
            by: ReplacedBy::RollingUpdate,
            at_once: amount.saturating_add(update.max_surge) - min_connected(amount, update),
            surge: surged,
            min_connected: Some(min_connected(amount, update)),
        }),
        (false, false) => None,
    };
    let instance = |f: &str| f.starts_with("attributes.") || f == "zones" || f == "fallback_machine_types";
    for ch in &mut plan.changes {
        let whom = match ch.field.as_str() {
            f if instance(f) && rolled => Change::REPLACED_NOW,
            f if instance(f) && !plan.recycle.is_empty() => Change::AT_LIFETIME,
            f if instance(f) => Change::NEW_INSTANCES,
            "provider" if switched => Change::REPLACED_NOW,
            "provider" => Change::NEW_INSTANCES,
            _ => continue,
        };
        ch.applies_to = whom.into();
    }
}

/// The fields `new` changes from `old` (for a new Config, each field set to something else than
/// its default: one left at it changes nothing): lifetime, timeout and the Swarming server are
/// copied onto each VM when it is made, so they apply to new instances; the amount, owners and
/// update policy apply to the pool; whom instance attributes and the provider affect is the VMs'
/// fates' to say ([`fates`]).
fn diff(old: Option<&Config>, new: &Config) -> Vec<Change> {
    let fields = |c: Option<&Config>| match c.map(serde_json::to_value) {
        Some(Ok(Value::Object(m))) => m,
        _ => serde_json::Map::new(),
    };
    let is_new = old.is_none();
    let (old, new, defaults) = (fields(old), fields(Some(new)), fields(Some(&Config::default())));
    // Whether `to` is worth a line: it differs from what it was, and a new Config's field is not
    // merely its default.
    let changed = |from: &Value, to: &Value, default: Option<&Value>| {
        from != to && !(is_new && (to.is_null() || default == Some(to)))
    };
    let mut out = Vec::new();
    for (key, to) in &new {
        let from = old.get(key).cloned().unwrap_or(Value::Null);
        if key == "attributes" {
            let (Value::Object(to), from) = (to, from) else { continue };
            let from = match from {
                Value::Object(m) => m,
                _ => serde_json::Map::new(),
            };
            let default = defaults.get(key).and_then(Value::as_object);
            for (attr, to) in to {
                let was = from.get(attr).cloned().unwrap_or(Value::Null);
                if changed(&was, to, default.and_then(|d| d.get(attr))) {
                    out.push(change(&format!("attributes.{attr}"), was, to.clone(), Change::NEW_INSTANCES));
                }
            }
        } else if changed(&from, to, defaults.get(key)) {
            let applies = match key.as_str() {
                "lifetime" | "timeout" | "swarming" | "fallback_machine_types" => Change::NEW_INSTANCES,
                _ => Change::THE_POOL,
            };
            out.push(change(key, from, to.clone(), applies));
        }
    }
    out
}

fn change(field: &str, from: Value, to: Value, applies_to: &str) -> Change {
    Change { field: field.to_owned(), from, to, applies_to: applies_to.to_owned() }
}

#[cfg(test)]
mod tests;
