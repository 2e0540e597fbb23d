//! `plan`: what applying a Config or an amount would do (the amount it would target, the VMs it
//! would create, drain and keep, the fields it changes and whom each affects, and why it could
//! not be applied), reading only.

use serde_json::Value;

use crate::config::Config;
use crate::ctx::Ctx;
use crate::model::{Change, ConfigRecord, Plan, PlanInput};
use crate::naming::{parse_id, vm_id};
use crate::ports::store::VmIndex;

use super::shared::{OpError, admit, by_index};

/// Dry run: what applying `input` to `prefix` would do, changing nothing. The amount is the one
/// `apply` then `set_amount` would leave: `input.amount`, else the current amount (0 for a new
/// Config), clamped by the amount rules of the Config it would have, now. NotFound when there
/// is no Config `prefix` and `input` brings none.
pub async fn plan(ctx: &Ctx, prefix: &str, input: PlanInput) -> Result<Plan, OpError> {
    let cur = ctx.store.config(prefix).await?.map(|c| c.value);
    let mut problems = Vec::new();
    let mut changes = Vec::new();
    if let Some(c) = &input.config {
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
    let Some(config) = input.config.as_ref().or(cur.as_ref().map(|r| &r.config)) else {
        return Err(OpError::NotFound(format!("Config {prefix}")));
    };
    let current = cur.as_ref().map(|r| r.current_amount);
    let paused = crate::pause::paused(ctx, cur.as_ref()).await?;
    if !problems.is_empty() {
        // It could not be applied: say why, and nothing about VMs (its amount rules may not even
        // be computable, and its size may be anything).
        let amount = current.unwrap_or(0);
        let (create, drain, keep) = (Vec::new(), Vec::new(), Vec::new());
        return Ok(Plan {
            prefix: prefix.to_owned(),
            amount,
            create,
            drain,
            keep,
            changes,
            problems,
            paused,
        });
    }
    if config.is_static() && input.amount.is_some() {
        return Err(crate::operate::managed_by_list(prefix, "amount"));
    }
    // The record it would have: a static pool's slots follow its list.
    let mut next = ConfigRecord { config: config.clone(), ..cur.clone().unwrap_or_default() };
    next.relist(cur.as_ref());
    if !config.is_static() {
        next.current_amount = config.amount.at(input.amount.or(current).unwrap_or(0), ctx.now());
    }
    let amount = next.current_amount;
    if current != Some(amount) {
        changes.push(Change {
            field: "current_amount".into(),
            from: current.map_or(Value::Null, Value::from),
            to: amount.into(),
            applies_to: Change::THE_POOL.into(),
        });
    }
    let ids = by_index(ctx.store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await?);
    // Another provider: every VM is replaced (drained, then made by the new one).
    let switching = cur.as_ref().is_some_and(|r| {
        ctx.providers.declared().resolve(&r.config.provider)
            != ctx.providers.declared().resolve(&config.provider)
    });
    let wanted = |id: &str| !switching && parse_id(id).is_some_and(|(p, i)| p == prefix && next.wants(i));
    let (keep, drain): (Vec<String>, Vec<String>) = ids.iter().cloned().partition(|id| wanted(id));
    let create = next
        .wanted()
        .into_iter()
        .map(|i| vm_id(prefix, i))
        .filter(|id| switching || !ids.contains(id))
        .collect();
    Ok(Plan { prefix: prefix.to_owned(), amount, create, drain, keep, changes, problems, paused })
}

/// The fields `new` changes from `old` (every set field for a new Config): attributes, lifetime,
/// timeout and the Swarming server are copied onto each VM when it is made, so they apply to
/// new instances; the amount and owners apply to the pool.
fn diff(old: Option<&Config>, new: &Config) -> Vec<Change> {
    let fields = |c: Option<&Config>| match c.map(serde_json::to_value) {
        Some(Ok(Value::Object(m))) => m,
        _ => serde_json::Map::new(),
    };
    let (old, new) = (fields(old), fields(Some(new)));
    let mut out = Vec::new();
    for (key, to) in &new {
        let from = old.get(key).cloned().unwrap_or(Value::Null);
        if key == "attributes" {
            let (Value::Object(to), from) = (to, from) else { continue };
            let from = match from {
                Value::Object(m) => m,
                _ => serde_json::Map::new(),
            };
            for (attr, to) in to {
                let was = from.get(attr).cloned().unwrap_or(Value::Null);
                if &was != to {
                    out.push(change(&format!("attributes.{attr}"), was, to.clone(), Change::NEW_INSTANCES));
                }
            }
        } else if &from != to {
            let applies = match key.as_str() {
                "lifetime" | "timeout" | "swarming" => Change::NEW_INSTANCES,
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
