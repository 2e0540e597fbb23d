//! The steps of a VM's life that handlers and providers share: whether it may be sent, its
//! machine made, a fault recorded (and the breaker told), a down instance replaced (and a Spot
//! failover told), the VM drained, an unsent incarnation dropped. Each is a compare-and-set on
//! the VM record plus the follow-up it needs.

use gce_backend_queues::{Task, When};

use crate::config::providers::ProviderIds;
use crate::env::Env;
use crate::error::TaskError;
use crate::metrics::Stage;
use crate::model::{ConfigRecord, Fault, FaultKind, Pause, Placed, Vm};
use crate::ports::store::Versioned;
use crate::work::{CountVms, CreateInstance, DestroyInstance, ManageBot};
use crate::{
    records::writes::drop_uncreated, records::writes::each, records::writes::update_vm,
    records::writes::write_vm, records::writes::write_vm_at,
};

/// Whether `vm`, not sent yet, may be sent now, given its Config `cfg` as read: the one rule.
/// No longer made by its Config (neither wanted nor kept warm: the amount dropped), drained, or
/// its Config gone: its record is dropped, since nothing exists to clean up. Held by a pause or
/// an open breaker (its canary excepted): it waits (resuming pushes `create_instance` again). Its
/// Swarming server not listed in the settings (a record from before them): recorded, not sent.
/// `paused` is the pause in force for `cfg`, as the caller read it (`pause::paused`).
pub async fn sendable(
    ctx: &Env,
    providers: &ProviderIds,
    cfg: Option<&ConfigRecord>,
    paused: Option<&Pause>,
    vm: &Vm,
) -> Result<bool, TaskError> {
    let now = ctx.now();
    let made = |c: &&ConfigRecord| c.keeps(vm, providers) || c.keeps_warm(vm, providers, now);
    let Some(cfg) = cfg.filter(made).filter(|_| !vm.drained) else {
        drop_uncreated(ctx, &vm.id, |v| v.insert_sent.is_none() && v.batch.is_empty()).await?;
        return Ok(false);
    };
    if crate::safety::pause::held_by(cfg, paused, Some(&vm.id)).is_some() {
        return Ok(false);
    }
    if let Err(why) = ctx.settings.trust.server(&vm.swarming) {
        let msg = format!("VM {} not made: its Swarming {why}", vm.id);
        ctx.record_once(&vm.config, CreateInstance::QUEUE, "untrusted", &msg).await?;
        return Ok(false);
    }
    Ok(true)
}

/// Records `placed` as `cur`'s machine (once per incarnation), and starts watching its bot.
/// `fixed`: a static machine (recorded, never inserted; logs call it so).
pub async fn created(ctx: &Env, cur: Versioned<Vm>, placed: Placed, fixed: bool) -> Result<(), TaskError> {
    match record_created(ctx, cur, placed, fixed).await? {
        Some(vm) => after_created(ctx, &[vm]).await,
        None => Ok(()),
    }
}

/// [`created`] for the instances one bulk made (one Config, project and zone): each recorded
/// (a few at a time, each its own compare-and-set), then what follows done once for them all.
pub async fn created_in_bulk(ctx: &Env, made: Vec<(Versioned<Vm>, Placed)>) -> Result<(), TaskError> {
    let recorded = each(made, |(cur, placed)| record_created(ctx, cur, placed, false)).await?;
    after_created(ctx, &recorded.into_iter().flatten().collect::<Vec<_>>()).await
}

/// Writes `placed` on `cur` (unless it is another incarnation's, or has an instance already);
/// returns the VM when its record names that instance (written now, or by a run before).
async fn record_created(
    ctx: &Env,
    cur: Versioned<Vm>,
    placed: Placed,
    fixed: bool,
) -> Result<Option<Vm>, TaskError> {
    let hostname = cur.value.hostname.clone();
    let written = write_vm_at(ctx, cur, |v| {
        if v.hostname != hostname || v.instance.is_some() {
            return false;
        }
        v.instance = Some(placed.clone());
        v.operation.clear();
        true
    })
    .await?;
    let Some((Versioned { value: vm, .. }, wrote)) =
        written.filter(|(v, _)| v.value.url() == Some(placed.url.as_str()))
    else {
        return Ok(None);
    };
    // Only the run that recorded the instance counts it (another may have recorded it first);
    // a static machine is recorded, not inserted.
    if wrote && !fixed {
        ctx.metrics.instance_op(&vm, "insert", "ok", "");
        if let Some(sent) = vm.insert_sent {
            ctx.metrics.lifecycle(&vm, Stage::InsertToCreated, sent, ctx.now());
        }
    }
    let what = if fixed { "static machine" } else { "instance" };
    tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "{what} created");
    Ok(Some(vm))
}

/// What follows instances recorded, all of one Config and one place: the place's backoff ends,
/// the Config's insert errors are resolved, and each bot is first looked for soon after boot.
async fn after_created(ctx: &Env, vms: &[Vm]) -> Result<(), TaskError> {
    let Some(first) = vms.first() else { return Ok(()) };
    crate::placement::backoff::clear_for(ctx, first).await?;
    ctx.resolved(&first.config, &[CreateInstance::QUEUE]).await?;
    // Its bot cannot be there yet: the first look comes soon after boot.
    let look = ctx.look_again(chrono::Duration::zero());
    let watch: Vec<ManageBot> = vms.iter().map(|v| ManageBot { id: v.id.clone() }).collect();
    ctx.push_many_at(&watch, When::After(look)).await?;
    Ok(())
}

/// Drops this incarnation's record (it has no instance), so a new hostname follows.
pub async fn drop_vm(ctx: &Env, vm: &Vm) -> Result<(), TaskError> {
    drop_uncreated(ctx, &vm.id, |v| v.hostname == vm.hostname).await
}

/// Marks the VM `cur` (as last read) drained and hands it to the step that retires it: one
/// never sent to GCE is dropped at once, one with an instance goes to `manage_bot`, one being
/// inserted to `create_instance` to finish first. Returns the VM as written (`None`: gone).
/// Whether it should go is the caller's to decide (a shrink here, a recycle over the API).
pub async fn drain(ctx: &Env, cur: &Vm) -> Result<Option<Vm>, TaskError> {
    let Some(vm) = update_vm(ctx, &cur.id, |v| {
        !v.drained && {
            v.drained = true;
            true
        }
    })
    .await?
    else {
        return Ok(None);
    };
    if !cur.drained {
        tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "VM drained");
    }
    if vm.instance.is_some() {
        ctx.push(&ManageBot { id: vm.id.clone() }).await?;
    } else if vm.insert_sent.is_none() {
        drop_uncreated(ctx, &vm.id, |v| v.insert_sent.is_none()).await?;
    } else {
        ctx.push(&CreateInstance { id: vm.id.clone() }).await?;
    }
    Ok(Some(vm))
}

/// Records `kind` on the VM's incarnation (once per kind; a VM being retired on purpose gets
/// none), with a WARN and a Config error, and asks for a recount so status follows at once.
/// Returns whether this call recorded it (runs that race record it once).
pub async fn fault(
    ctx: &Env,
    vm: &Vm,
    kind: FaultKind,
    detail: &str,
    stage: &str,
) -> Result<bool, TaskError> {
    let now = ctx.now();
    if vm.fault.as_ref().is_some_and(|f| f.kind == kind) {
        return Ok(false);
    }
    if vm.retiring(now, crate::safety::pause::held_of(ctx, &vm.config).await?.is_some()) {
        return Ok(false);
    }
    let written = write_vm(ctx, &vm.id, |v| {
        v.hostname == vm.hostname && v.fault.as_ref().is_none_or(|f| f.kind != kind) && {
            v.fault = Some(Fault { unknown: Default::default(), kind, detail: detail.to_owned(), at: now });
            true
        }
    })
    .await?;
    if !written.is_some_and(|(_, wrote)| wrote) {
        return Ok(false);
    }
    tracing::warn!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "{detail}");
    let code = match kind {
        FaultKind::BotDead => "bot_dead",
        FaultKind::InstanceDown => "instance_down",
        FaultKind::NeverConnected => "never_connected",
    };
    ctx.record_vm(vm, stage, code, &format!("{}: {detail}", vm.hostname), "").await?;
    ctx.push(&CountVms { prefix: vm.config.clone() }).await?;
    crate::safety::breaker::failed(ctx, vm, kind).await?;
    Ok(true)
}

/// The one rule for an instance that is down (stopped, preempted, suspended) or gone: record
/// it and destroy the instance now, so the VM is replaced without waiting for any timeout.
pub async fn replace_down(ctx: &Env, vm: &Vm, status: Option<&str>, stage: &str) -> Result<(), TaskError> {
    if vm.destroying.is_some() {
        return Ok(()); // our own delete: destroy_instance and delete_bot finish it
    }
    // A Spot or preemptible instance that stops was preempted: a normal replacement (counted;
    // no zone backoff).
    let preempted = vm.attributes.preemptible();
    let detail = match (status, preempted) {
        (Some(s), true) => format!("instance {s} (preempted): replacing it now"),
        (Some(s), false) => format!("instance {s}: replacing it now"),
        (None, _) => "instance gone: replacing it now".to_owned(),
    };
    let recorded = fault(ctx, vm, FaultKind::InstanceDown, &detail, stage).await?;
    if recorded && preempted && status.is_some() {
        ctx.metrics.instance_op(vm, "preempted", "ok", ""); // once per incarnation
    }
    // Counted for a Spot failover (once per incarnation, also when a run that recorded the
    // fault stopped before counting it).
    if recorded || vm.fault.as_ref().is_some_and(|f| f.kind == FaultKind::InstanceDown) {
        crate::placement::spot::preempted(ctx, vm).await?;
    }
    match DestroyInstance::of(vm) {
        Some(destroy) => ctx.push(&destroy).await.map(drop),
        None => Ok(()),
    }
}
