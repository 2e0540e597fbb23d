//! `create_vm`: creates one VM record (id `<prefix>-<index>`, a fresh hostname, the Config's
//! template with its zone filled in and the machine type of its rank (`zones::pick`), made
//! standard while a Spot failover is in force (`ConfigRecord::new_vm_attributes`), the rank
//! counted among its Config's placements; for a static pool, the hostname listed for that index) if
//! it does not exist, is still wanted (or kept warm) and its Config is not paused, then pushes
//! `create_instance` at once, or `bulk_insert` while many of its Config's VMs are on their way
//! (and `park_vm` for a VM made for the warm pool).

use rand::Rng;

use crate::config::providers::Kind;
use crate::providers::gce_bulk;
use crate::work::{BulkInsert, CreateInstance, CreateVm, Next, ParkVm};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::Vm;
use crate::naming::{new_hostname, parse_id};
use crate::ports::store::Expect;


/// Handles one task.
pub async fn run(ctx: &Ctx, t: CreateVm) -> Result<Next, TaskError> {
    if ctx.vm(&t.id).await?.is_some() {
        return Ok(Next::Done);
    }
    let (prefix, index) = parse_id(&t.id).ok_or_else(|| TaskError::Invalid(format!("VM id {:?}", t.id)))?;
    let Some(cfg) = ctx.store.config(prefix).await? else { return Ok(Next::Done) };
    if !cfg.value.makes(index) || crate::pause::held(ctx, &cfg.value, Some(&t.id)).await?.is_some() {
        return Ok(Next::Done); // resuming a paused Config expands it again
    }
    let c = &cfg.value.config;
    let hostname = match cfg.value.listed.slots.get(&index) {
        Some(listed) if c.is_static() => listed.clone(),
        _ => new_hostname(&t.id),
    };
    // Up to 10 % more lifetime, so a pool's instances are not all replaced at once.
    let extra = if c.lifetime.0 >= 10 { rand::rng().random_range(0..c.lifetime.0 / 10) } else { 0 };
    let (zone, rank) = crate::zones::pick(ctx, &cfg.value, &t.id).await?;
    let (attributes, failover) = cfg.value.new_vm_attributes(&zone, rank, ctx.now());
    let vm = Vm {
        id: t.id.clone(),
        config: prefix.to_owned(),
        index,
        hostname,
        attributes,
        swarming: c.swarming.clone(),
        lifetime: c.lifetime.0.saturating_add(extra),
        timeout: c.timeout.0,
        revision: cfg.value.revision.clone(),
        configured: ctx.now(),
        provider: ctx.providers.declared().resolve(&c.provider).to_owned(),
        failover,
        rank,
        canary: cfg.value.breaker.open.as_ref().is_some_and(|o| o.canary.as_deref() == Some(t.id.as_str())),
        ..Vm::default()
    };
    if ctx.store.put_vm(&vm, Expect::Absent).await? {
        if let Some(r) = rank {
            ctx.store.bump(prefix, &crate::model::counters::placed(r)).await?;
        }
        // Made for the warm pool: `park_vm` follows it until its bot has connected, then parks it.
        if !cfg.value.wants(index) {
            ctx.push(&ParkVm { id: t.id.clone() }).await?;
        }
        // Many of the Config's VMs on their way: sent with the others, by `bulk_insert`.
        let providers = ctx.providers.declared();
        let gce = providers.kind(&vm.provider) == Some(Kind::Gce);
        if gce && gce_bulk::in_bulk(ctx, &cfg.value).await? {
            ctx.push(&BulkInsert { prefix: prefix.to_owned() }).await?;
        } else {
            ctx.push(&CreateInstance { id: t.id }).await?;
        }
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
