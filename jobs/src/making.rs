//! Making VM records, the one way: `create_vm` makes one, `expand_config` a batch of its
//! Config's missing ones, `audit_instances` one whose record was lost beside its live instance
//! ([`adopt`]). A record is made once (written only where none exists) with a fresh
//! hostname (for a static pool, the one listed for its index), the Config's template with its
//! zone filled in and the machine type of its rank (`zones::places`, once per batch), made standard while a Spot
//! failover is in force (`ConfigRecord::new_vm_attributes`), the rank counted among its
//! Config's placements; then it is handed on as its provider says ([`batch`]: `create_instance`
//! each, or the Config's `bulk_insert`), and to `park_vm` when made for the warm pool.

use rand::Rng;

use crate::config::labels::{self, revision_label};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::marks::ADOPTED;
use crate::model::{ConfigRecord, Vm};
use crate::ports::compute::Instance;
use crate::ports::store::Expect;
use crate::providers::Batch;
use crate::records::writes::each;
use crate::work::{ManageBot, ParkVm};
use crate::{naming::new_hostname, naming::parse_id, naming::vm_id_of};

/// A new incarnation of VM `id` (index `index`) of Config `rec` in `place` (its zone and rank)
/// named `hostname`, as the Config's template makes it now.
fn incarnation(
    ctx: &Ctx,
    rec: &ConfigRecord,
    id: &str,
    index: u32,
    (zone, rank): (String, Option<u32>),
    hostname: String,
) -> Vm {
    let c = &rec.config;
    // Up to 10 % more lifetime, so a pool's instances are not all replaced at once.
    let extra = if c.lifetime.0 >= 10 { rand::rng().random_range(0..c.lifetime.0 / 10) } else { 0 };
    let (attributes, failover) = rec.new_vm_attributes(&zone, rank, ctx.now());
    Vm {
        id: id.to_owned(),
        config: c.prefix.clone(),
        index,
        hostname,
        attributes,
        swarming: c.swarming.clone(),
        lifetime: c.lifetime.0.saturating_add(extra),
        timeout: c.timeout.0,
        revision: rec.revision.clone(),
        configured: ctx.now(),
        provider: ctx.providers.declared().resolve(&c.provider).to_owned(),
        failover,
        rank,
        canary: rec.breaker.open.as_ref().is_some_and(|o| o.canary.as_deref() == Some(id)),
        ..Vm::default()
    }
}

/// Makes the record of VM `id` (index `index`) of Config `rec` in `place` (its zone and rank)
/// unless one exists; returns whether this call made it. Whether it is wanted and not held is
/// the caller's to decide.
async fn make(
    ctx: &Ctx,
    rec: &ConfigRecord,
    id: &str,
    index: u32,
    place: (String, Option<u32>),
) -> Result<bool, TaskError> {
    let c = &rec.config;
    let hostname = match rec.listed.slots.get(&index) {
        Some(listed) if c.is_static() => listed.clone(),
        _ => new_hostname(id),
    };
    let rank = place.1;
    let mut vm = incarnation(ctx, rec, id, index, place, hostname);
    if !crate::records::meter::put(ctx, None, &mut vm, Expect::Absent).await? {
        return Ok(false);
    }
    if let Some(r) = rank {
        ctx.ports.store.bump(&c.prefix, &crate::model::counters::placed(r)).await?;
    }
    // Made for the warm pool: `park_vm` follows it until its bot has connected, then parks it.
    if !rec.wants(index) {
        ctx.push(&ParkVm { id: id.to_owned() }).await?;
    }
    Ok(true)
}

/// The VM (id and index) of Config `rec` that `instance` runs, if the Config still wants it
/// and the instance is not on its way down: what a lost record may be made again for. Its
/// labels must name the deployment's Config (`audit_instances` lists only the deployment's).
pub fn adoptable<'a>(rec: &ConfigRecord, instance: &'a Instance) -> Option<(&'a str, u32)> {
    let label = |k: &str| instance.labels.get(k).map(String::as_str);
    let id = label(labels::VM).or_else(|| vm_id_of(&instance.name))?;
    let (prefix, index) = parse_id(id)?;
    let ours = prefix == rec.config.prefix && label(labels::CONFIG) == Some(prefix);
    (ours && !instance.is_down() && rec.orphaned.is_none() && rec.makes(index)).then_some((id, index))
}

/// Makes the record of VM `id` (index `index`) of Config `rec` again for `instance`, its live
/// instance in `zone` (the record was lost, as in a Redis failover), unless a record of that id
/// exists (the write is made only where none is): the VM keeps its instance, hostname, creation
/// time (its lifetime counts from there) and the revision it was made from, and its bot is looked
/// for. Returns whether it made it.
pub async fn adopt(
    ctx: &Ctx,
    rec: &ConfigRecord,
    (id, index): (&str, u32),
    zone: &str,
    instance: &Instance,
) -> Result<bool, TaskError> {
    let mut vm = incarnation(ctx, rec, id, index, (zone.to_owned(), None), instance.name.clone());
    vm.instance = Some(instance.placed());
    vm.configured = instance.created.min(ctx.now());
    // An instance made from a template says its revision; one made from an older one is kept as
    // outdated (rolled out like any other), else it counts as made from the current revision.
    match instance.labels.get(labels::REVISION) {
        Some(label) if *label != revision_label(&rec.revision) => vm.revision = label.clone(),
        _ => {}
    }
    if !crate::records::meter::put(ctx, None, &mut vm, Expect::Absent).await? {
        return Ok(false);
    }
    tracing::warn!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone, "VM record lost while its instance lives: adopted from the instance's labels");
    ctx.metrics.cleanup("lost_vm_record", "adopted");
    ctx.push(&ManageBot { id: id.to_owned() }).await?;
    Ok(true)
}

/// Before VMs of Config `rec` are made, once per store generation (a new one after a failover
/// or a restart, which may have lost acknowledged writes): its machines whose VM records are
/// missing are adopted back, so a lost record is not made again beside its machine (and the
/// machine then deleted as a leak). Its provider finds them ([`crate::providers::Provider::lost`];
/// Compute Engine: one instances.list per zone of the Config); nothing for a store that never
/// loses what it acknowledged, nor for a provider whose machines do not say which VM they are
/// (or that cannot be asked now: its VMs are not sent either).
async fn adopt_lost(ctx: &Ctx, rec: &ConfigRecord) -> Result<(), TaskError> {
    let provider = match ctx.providers.get(ctx, &rec.config.provider).await {
        Ok(p) if p.names_vms() => p,
        _ => return Ok(()),
    };
    let Some(generation) = ctx.ports.store.generation().await? else { return Ok(()) };
    let prefix = &rec.config.prefix;
    let key = format!("{prefix}@{generation}");
    if ctx.ports.store.marked(ADOPTED, &key).await?.is_some() {
        return Ok(());
    }
    for (zone, instance) in provider.lost(ctx, rec).await? {
        if let Some(slot) = adoptable(rec, &instance) {
            adopt(ctx, rec, slot, &zone, &instance).await?;
        }
    }
    let mine = format!("{prefix}@");
    for (old, _) in ctx.ports.store.marks(ADOPTED).await? {
        if old.starts_with(&mine) && old != key {
            ctx.ports.store.unmark(ADOPTED, &old).await?;
        }
    }
    ctx.ports.store.mark(ADOPTED, &key, ctx.now()).await?;
    Ok(())
}

/// Makes the records of VMs `ids` of Config `rec` that do not exist (an id that names no index
/// is skipped), placed together (`zones::places`), a few at a time, and hands those made on
/// ([`send`]).
pub async fn make_all(ctx: &Ctx, rec: &ConfigRecord, ids: &[String]) -> Result<(), TaskError> {
    adopt_lost(ctx, rec).await?;
    let indexed: Vec<(String, u32)> =
        ids.iter().filter_map(|id| parse_id(id).map(|(_, index)| (id.clone(), index))).collect();
    let places = crate::placement::zones::places(ctx, rec, indexed.len()).await?;
    let made = each(indexed.into_iter().zip(places), |((id, index), place)| async move {
        Ok(make(ctx, rec, &id, index, place).await?.then_some(id))
    })
    .await?;
    send(ctx, rec, &made.into_iter().flatten().collect::<Vec<_>>()).await
}

/// How VMs `ids` of Config `rec`, waiting for their first machine, are sent: as the Config's
/// provider says ([`crate::providers::Provider::create_batch`], the one place that decides
/// between one by one and together); each by its `create_instance` when the provider cannot be
/// asked now (its `create_instance` says why). For `send` and the `create_instances` cron.
pub async fn batch(ctx: &Ctx, rec: &ConfigRecord, ids: &[String]) -> Result<Batch, TaskError> {
    match ctx.providers.get(ctx, &rec.config.provider).await {
        Ok(p) => p.create_batch(ctx, rec, ids).await,
        Err(_) => Ok(Batch::each(ids)),
    }
}

/// Hands VMs of Config `rec` just made to what sends them ([`batch`]).
async fn send(ctx: &Ctx, rec: &ConfigRecord, made: &[String]) -> Result<(), TaskError> {
    if made.is_empty() {
        return Ok(());
    }
    match batch(ctx, rec, made).await? {
        Batch::Together(bulk) => ctx.push(&bulk).await.map(drop),
        Batch::Each(each) => ctx.push_many(&each).await.map(drop),
    }
}
