//! Records read and written with a compare-and-set: a Config or VM changed by a closure,
//! re-read on a lost race (a few times, then a Conflict), and the read that quarantines a VM
//! record that does not decode.

use crate::env::Env;
use crate::error::TaskError;
use crate::model::{ConfigRecord, Observed, Vm};
use crate::ports::store::{Expect, StoreError, Versioned};
use crate::work::{ExpandConfig, ManageBot};

/// How many records one step reads or writes at once (each its own call).
pub const AT_ONCE: usize = 32;

/// `f` of each of `items`, [`AT_ONCE`] at a time, the results in the items' order (the first
/// error ends it).
pub async fn each<I, T, F, Fut>(items: impl IntoIterator<Item = I>, f: F) -> Result<Vec<T>, TaskError>
where
    F: FnMut(I) -> Fut,
    Fut: std::future::Future<Output = Result<T, TaskError>>,
{
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(items).map(f).buffered(AT_ONCE).try_collect().await
}

/// How many times a compare-and-set write re-reads after losing a race before it gives up
/// with a Conflict (the one retry count of record writes).
pub const CAS_TRIES: usize = 5;

/// One VM. A record that does not decode is quarantined (see [`quarantine`]) and reads as
/// absent: the caller has nothing to do; so does a newer build's record ([`left_to_newer`]).
pub async fn read_vm(ctx: &Env, id: &str) -> Result<Option<Versioned<Vm>>, TaskError> {
    match ctx.ports.store.vm(id).await {
        Ok(v) => Ok(v),
        Err(StoreError::Corrupt { error, version, .. }) => {
            quarantine(ctx, id, &error, version).await?;
            Ok(None)
        }
        Err(StoreError::Newer { key, format }) => {
            left_to_newer(ctx, &key, format).await?;
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// A record (`vm <id>`, `cfg <prefix>`) a newer build wrote in a format this one does not act
/// on: left to that build, said once on its Config's status (stage `format`, code `newer`) and
/// counted (`records_left_to_newer_build`). Not quarantined: the record is sound.
pub async fn left_to_newer(ctx: &Env, key: &str, format: u32) -> Result<(), TaskError> {
    let (kind, name) = key.split_once(' ').unwrap_or(("", key));
    let prefix = match kind {
        "vm" => crate::naming::parse_id(name).map_or(name, |(p, _)| p),
        _ => name,
    };
    ctx.metrics.left_to_newer(if kind == "vm" { "vm" } else { "config" });
    let message = format!("{key}: {}", crate::model::Undecoded::Newer(format));
    ctx.record_once(prefix, "format", "newer", &message).await
}

/// The record of VM `id` for reading: `None` when it is gone or does not decode (one unreadable
/// record hides itself, not the rest; `read_vm` is what quarantines it).
pub async fn readable_vm(ctx: &Env, id: &str) -> Result<Option<Vm>, TaskError> {
    match ctx.ports.store.vm(id).await {
        Ok(v) => Ok(v.map(|v| v.value)),
        Err(StoreError::Corrupt { .. } | StoreError::Newer { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The revisions Config `prefix`'s readable VM records were made from (read a few at a time).
pub async fn revisions_of(ctx: &Env, prefix: &str) -> Result<std::collections::BTreeSet<String>, TaskError> {
    let ids = ctx.ports.store.vm_ids(crate::ports::store::VmIndex::OfConfig(prefix.to_owned())).await?;
    let all = each(ids, |id| async move { readable_vm(ctx, &id).await }).await?;
    Ok(all.into_iter().flatten().map(|v| v.revision).collect())
}

/// The readable records of VMs `ids` ([`readable_vm`]), in order, and the last observation of
/// each one's bot.
pub async fn vms_and_bots(ctx: &Env, ids: &[String]) -> Result<(Vec<Vm>, Vec<Option<Observed>>), TaskError> {
    let mut vms = Vec::with_capacity(ids.len());
    for id in ids {
        vms.extend(readable_vm(ctx, id).await?);
    }
    let hostnames: Vec<String> = vms.iter().map(|v| v.hostname.clone()).collect();
    let seen = ctx.ports.store.bots(&hostnames).await?;
    Ok((vms, seen))
}

/// A VM record that does not decode: its instance is looked up by label in its Config's
/// project and zone and the record rebuilt around it, drained, so the normal path terminates
/// its bot, destroys the instance and a fresh VM follows; without an instance (or a readable
/// Config) the record is dropped and the Config expanded again. Reported on the Config's status.
///
/// `version` is the one the corrupt record was read at: every write names it, so a record that
/// another run already repaired (or a new VM since) is never touched.
pub async fn quarantine(ctx: &Env, id: &str, error: &str, version: Option<u64>) -> Result<(), TaskError> {
    let version = match version {
        Some(v) => v,
        None => match ctx.ports.store.vm_version(id).await? {
            Some(v) => v,
            None => return Ok(()),
        },
    };
    let Some((prefix, index)) = crate::naming::parse_id(id) else {
        ctx.ports.store.delete_vm(id, version).await?;
        return Ok(());
    };
    // A Config that cannot be read (store down, record corrupt) is an error: try again later,
    // rather than drop a record whose instance was not looked for.
    let config = ctx.ports.store.config(prefix).await?.map(|c| c.value.config);
    let mut found = None;
    // Its instance, in any zone of its Config (a static pool has none).
    if let Some(c) = config.as_ref().filter(|c| !c.is_static()) {
        // By the Config's label: an instance made in bulk has no VM label (its name tells).
        let filter = format!(
            "(labels.{} = \"{}\") (labels.{} = \"{prefix}\")",
            crate::config::labels::DEPLOYMENT,
            ctx.settings.deployment,
            crate::config::labels::CONFIG
        );
        'zones: for zone in c.zone_names() {
            let mut page = None;
            loop {
                let (listed, next) =
                    ctx.ports.compute.list(&c.attributes.project, zone, &filter, page).await?;
                if let Some(inst) = listed.into_iter().find(|i| i.belongs_to(id, &ctx.settings.deployment)) {
                    found = Some((inst, zone.to_owned()));
                    break 'zones;
                }
                match next {
                    Some(p) => page = Some(p),
                    None => break,
                }
            }
        }
    }
    let message = match (&config, &found) {
        (Some(c), Some((inst, zone))) => {
            let now = ctx.now();
            let attributes = c.attributes_in(zone);
            let mut vm = Vm {
                id: id.to_owned(),
                config: prefix.to_owned(),
                index,
                hostname: inst.name.clone(),
                attributes,
                swarming: c.swarming.clone(),
                lifetime: c.lifetime.0,
                timeout: c.timeout.0,
                configured: now,
                insert_sent: Some(now),
                instance: Some(inst.placed()),
                drained: true,
                ..Vm::default()
            };
            // What the corrupt record was billed as is not known: metered afresh from now.
            if crate::records::meter::put(ctx, None, &mut vm, Expect::Version(version)).await? {
                ctx.push(&ManageBot { id: id.to_owned() }).await?;
            }
            format!(
                "VM {id}: its record does not decode ({error}); rebuilt around instance {} and drained",
                inst.name
            )
        }
        _ => {
            if ctx.ports.store.delete_vm(id, version).await? {
                ctx.push(&ExpandConfig { prefix: prefix.to_owned() }).await?;
            }
            format!(
                "VM {id}: its record does not decode ({error}) and no instance of it was found; record dropped"
            )
        }
    };
    ctx.record_once(prefix, "quarantine", "corrupt", &message).await
}

/// The one way a VM record goes without going through GCE: when it has no instance and `only`
/// holds for it (read fresh, deleted with a compare-and-set).
pub async fn drop_uncreated(ctx: &Env, id: &str, only: impl Fn(&Vm) -> bool) -> Result<(), TaskError> {
    if let Some(cur) = read_vm(ctx, id).await?
        && cur.value.instance.is_none()
        && only(&cur.value)
    {
        crate::records::meter::delete(ctx, &cur).await?;
    }
    Ok(())
}

/// Applies `change` to the Config record `prefix` with a compare-and-set, re-reading on a lost
/// race (a few times, then a Conflict). `change` returns false to leave it alone, or an error to
/// refuse. Returns the record as written (or as found) and whether this call wrote it; `None`
/// when there is no such Config.
pub async fn update_config<E: From<TaskError>>(
    ctx: &Env,
    prefix: &str,
    mut change: impl FnMut(&mut ConfigRecord) -> Result<bool, E>,
) -> Result<Option<(ConfigRecord, bool)>, E> {
    for _ in 0..CAS_TRIES {
        let Some(cur) = ctx.ports.store.config(prefix).await.map_err(TaskError::from)? else {
            return Ok(None);
        };
        let mut rec = cur.value;
        if !change(&mut rec)? {
            return Ok(Some((rec, false)));
        }
        let expect = Expect::Version(cur.version);
        if ctx.ports.store.put_config(&rec, expect).await.map_err(TaskError::from)? {
            return Ok(Some((rec, true)));
        }
    }
    Err(TaskError::Conflict(format!("cfg {prefix}")).into())
}

/// Applies `change` to the VM `id` with a compare-and-set, re-reading on a lost race. `change`
/// returns false to leave the record alone. Returns the VM as written (or as found), `None` if
/// it is gone.
pub async fn update_vm(
    ctx: &Env,
    id: &str,
    change: impl Fn(&mut Vm) -> bool,
) -> Result<Option<Vm>, TaskError> {
    Ok(write_vm(ctx, id, change).await?.map(|(vm, _)| vm))
}

/// [`update_vm`] that also says whether this call wrote the change (false: `change` declined,
/// e.g. because another run already made it), so an effect of the write happens once.
pub async fn write_vm(
    ctx: &Env,
    id: &str,
    change: impl Fn(&mut Vm) -> bool,
) -> Result<Option<(Vm, bool)>, TaskError> {
    Ok(write_vm_loop(ctx, id, None, change).await?.map(|(cur, wrote)| (cur.value, wrote)))
}

/// [`write_vm`] starting from `known`, the record as this run read it: the compare-and-set names
/// its version, so nothing is read again unless another run wrote since. Returns the record as
/// written, with its new version (a write adds one), so a run may write again without a read.
pub async fn write_vm_at(
    ctx: &Env,
    known: Versioned<Vm>,
    change: impl Fn(&mut Vm) -> bool,
) -> Result<Option<(Versioned<Vm>, bool)>, TaskError> {
    let id = known.value.id.clone();
    write_vm_loop(ctx, &id, Some(known), change).await
}

async fn write_vm_loop(
    ctx: &Env,
    id: &str,
    mut known: Option<Versioned<Vm>>,
    change: impl Fn(&mut Vm) -> bool,
) -> Result<Option<(Versioned<Vm>, bool)>, TaskError> {
    for _ in 0..CAS_TRIES {
        let cur = match known.take() {
            Some(cur) => cur,
            None => match read_vm(ctx, id).await? {
                Some(cur) => cur,
                None => return Ok(None),
            },
        };
        let old = cur.value.meter.clone();
        let mut vm = cur.value;
        if !change(&mut vm) {
            return Ok(Some((Versioned { value: vm, version: cur.version }, false)));
        }
        if crate::records::meter::put(ctx, old.as_ref(), &mut vm, Expect::Version(cur.version)).await? {
            return Ok(Some((Versioned { value: vm, version: cur.version + 1 }, true)));
        }
    }
    Err(TaskError::Conflict(id.to_owned()))
}

#[cfg(test)]
mod tests;
