//! One insert per VM, for the Compute Engine provider: the instance a VM needs, the requestIds of
//! its inserts and deletes, and an insert sent alone and followed to its end (`providers/gce.rs`
//! says when; `providers/gce_bulk.rs` sends many at once and hands the ones left over here).

use crate::config::{Metadata, labels};
use crate::env::{Env, request_id};
use crate::error::TaskError;
use crate::metrics::Stage;
use crate::model::Vm;
use crate::ports::compute::{ComputeError, InstanceSpec, Kind as ComputeKind, Operation};
use crate::ports::store::Versioned;
use crate::work::{CreateInstance, Next};
use crate::{fleet::lifecycle::created, fleet::lifecycle::drop_vm};
use crate::{placement::backoff, placement::backoff::Scope};
use crate::{records::writes::update_vm, records::writes::write_vm_at};
use gce_backend_queues::Task;

/// The stage its errors are recorded under (its queue's, as the handler's).
const STAGE: &str = CreateInstance::QUEUE;

/// The instance `vm` needs: its template, its metadata with the Swarming server, and our labels
/// (the adapter turns it into Compute's resource).
pub fn instance_spec(vm: &Vm, deployment: &str) -> InstanceSpec {
    let a = &vm.attributes;
    let mut metadata: Vec<(String, String)> =
        a.metadata.iter().filter_map(Metadata::pair).map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    metadata.push((crate::config::SWARMING_SERVER_KEY.into(), vm.swarming.clone()));
    let mut labels = a.label.clone();
    labels.insert(labels::DEPLOYMENT.into(), deployment.into());
    labels.insert(labels::CONFIG.into(), vm.config.clone());
    labels.insert(labels::VM.into(), vm.id.clone());
    InstanceSpec { name: vm.hostname.clone(), attributes: a.clone(), metadata, labels }
}

/// The requestId of attempt `attempt` of `verb` (`create`, `destroy`) on `hostname`:
/// `<verb>-<hostname>`, then `-<attempt>` after an operation that failed for good.
fn attempt_request_id(verb: &str, hostname: &str, attempt: u32) -> String {
    match attempt {
        0 => request_id(&format!("{verb}-{hostname}")),
        n => request_id(&format!("{verb}-{hostname}-{n}")),
    }
}

/// The requestId of an insert attempt.
pub fn insert_request_id(vm: &Vm) -> String {
    attempt_request_id("create", &vm.hostname, vm.insert_attempt)
}

/// The requestId of a delete attempt.
pub fn delete_request_id(vm: &Vm) -> String {
    attempt_request_id("destroy", &vm.hostname, vm.destroy_attempt)
}

/// Sends `cur`'s insert alone (`create-<hostname>[-<attempt>]`) and records its operation; the
/// VM is not in a bulk and may be sent (the caller checked: not backed off, wanted, not paused).
pub(crate) async fn insert_alone(ctx: &Env, cur: Versioned<Vm>) -> Result<Next, TaskError> {
    let now = ctx.now();
    let vm = &cur.value;
    let (cur, sending) = match vm.insert_sent {
        Some(_) => (cur, false),
        None => match write_vm_at(ctx, cur, |v| {
            v.insert_sent.is_none() && v.batch.is_empty() && {
                v.insert_sent = Some(now);
                true
            }
        })
        .await?
        {
            Some(written) => written,
            None => return Ok(Next::Done),
        },
    };
    let vm = &cur.value;
    let rid = insert_request_id(vm);
    let op = match ctx
        .ports
        .compute
        .insert(vm.project(), vm.zone(), &rid, &instance_spec(vm, &ctx.settings.deployment))
        .await
    {
        Ok(op) => {
            // The slot's first accepted insert only (a re-send after a failed operation has a
            // later attempt; one refused outright sends again from here).
            if sending && vm.insert_attempt == 0 {
                ctx.metrics.lifecycle(vm, Stage::ChangeToInsert, vm.configured, now);
            }
            op
        }
        Err(e) if e.kind == ComputeKind::AlreadyExists => return adopt(ctx, cur, e).await,
        Err(e) => return failed(ctx, vm, e, "").await,
    };
    if op.done || op.name == vm.operation {
        return follow(ctx, cur, op).await;
    }
    // Recorded, so the next look asks for the operation instead of sending the insert again.
    let (hostname, attempt) = (vm.hostname.clone(), vm.insert_attempt);
    let written = write_vm_at(ctx, cur, |v| {
        v.hostname == hostname && v.insert_attempt == attempt && v.instance.is_none() && {
            v.operation = op.name.clone();
            true
        }
    })
    .await?;
    match written {
        Some((cur, _)) => follow(ctx, cur, op).await,
        None => Ok(Next::Done),
    }
}

/// Follows an insert's operation: looks again while it runs; records a failure or the instance.
pub(crate) async fn follow(ctx: &Env, cur: Versioned<Vm>, op: Operation) -> Result<Next, TaskError> {
    let vm = &cur.value;
    if !op.done {
        let sent = vm.insert_sent.unwrap_or_else(|| ctx.now());
        return Ok(Next::After(ctx.operation_poll(ctx.now() - sent)));
    }
    if let Some(e) = op.error {
        // The failed operation stays bound to its requestId: the next try needs a new one.
        update_vm(ctx, &vm.id, |v| {
            if v.hostname != vm.hostname || v.insert_attempt != vm.insert_attempt {
                return false; // another run already moved on
            }
            v.insert_attempt += 1;
            v.insert_sent = None;
            v.operation.clear();
            true
        })
        .await?;
        return failed(ctx, vm, e, &op.name).await;
    }
    match ctx.ports.compute.get(vm.project(), vm.zone(), &vm.hostname).await? {
        Some(inst) => created(ctx, cur, inst.placed(), false).await.map(|()| Next::Done),
        None => {
            let msg = format!("operation {} is DONE but instance {} is not found", op.name, vm.hostname);
            ctx.record_vm(vm, STAGE, "404", &msg, &op.name).await?;
            drop_vm(ctx, vm).await.map(|()| Next::Done)
        }
    }
}

/// 409: the name exists. Ours (labels name this VM in this deployment): adopt it. Not ours: this
/// hostname is taken, so drop the record and let the next expansion pick a new one.
async fn adopt(ctx: &Env, cur: Versioned<Vm>, e: ComputeError) -> Result<Next, TaskError> {
    let vm = &cur.value;
    let inst = ctx.ports.compute.get(vm.project(), vm.zone(), &vm.hostname).await?;
    match inst {
        Some(inst) if inst.belongs_to(&vm.id, &ctx.settings.deployment) => {
            created(ctx, cur, inst.placed(), false).await.map(|()| Next::Done)
        }
        Some(_) => {
            let msg = format!("{}: instance {} exists and is not ours", e.message, vm.hostname);
            ctx.record_vm(vm, STAGE, &e.code, &msg, "").await?;
            drop_vm(ctx, vm).await.map(|()| Next::Done)
        }
        // Gone between the insert and the get: try again.
        None => Ok(Next::After(ctx.watch())),
    }
}

/// Drops `vm` (no instance was made) and asks for its Config's expansion, so the VM is made
/// again at once on another rank of its machine types or in another zone (`ranks::elsewhere`).
pub(crate) async fn move_zone(ctx: &Env, vm: &Vm) -> Result<Next, TaskError> {
    let machine_type = crate::config::short_machine_type(&vm.attributes.machine_type);
    tracing::info!(config = %vm.config, vm = %vm.id, zone = %vm.zone(), machine_type, rank = ?vm.rank, "zone or machine type backed off: the VM is made again on another rank or zone");
    drop_vm(ctx, vm).await?;
    ctx.push(&crate::work::ExpandConfig { prefix: vm.config.clone() }).await?;
    Ok(Next::Done)
}

/// An insert of `vm` that no operation holds (refused outright, or never sent): the VM counts as
/// not sent, so the next try is a new send and passes the checks of one (still wanted, not
/// paused).
async fn unsent(ctx: &Env, vm: &Vm) -> Result<(), TaskError> {
    update_vm(ctx, &vm.id, |v| {
        v.hostname == vm.hostname && v.instance.is_none() && v.insert_sent.take().is_some()
    })
    .await
    .map(drop)
}

async fn failed(ctx: &Env, vm: &Vm, e: ComputeError, op: &str) -> Result<Next, TaskError> {
    if let (ComputeKind::Throttled, Some(wait)) = (e.kind, e.retry_after) {
        // Not sent (the project's rate limit): no error, no attempt; it goes when a token is there.
        unsent(ctx, vm).await?;
        return Ok(Next::After(wait));
    }
    if e.retry_after.is_some() {
        // Held back by the project's open breaker: a wait, not a failure (nothing to record).
        return Err(e.into());
    }
    ctx.metrics.instance_op(vm, "insert", e.kind.as_str(), &e.code);
    ctx.record_vm(vm, STAGE, &e.code, &e.message, op).await?;
    match e.kind {
        ComputeKind::Quota | ComputeKind::Stockout => {
            if op.is_empty() {
                unsent(ctx, vm).await?; // refused outright
            }
            crate::placement::spot::refused(ctx, vm, &e.code, op).await?;
            let wait = backoff::hit(ctx, &Scope::refused(vm), &e.code).await?;
            // A multi-zone Config, or one with ranks: made again at once where there is room.
            if crate::placement::ranks::elsewhere(ctx, vm).await? {
                return move_zone(ctx, vm).await;
            }
            Ok(Next::After(wait))
        }
        ComputeKind::RateLimited | ComputeKind::Transient | ComputeKind::Throttled => {
            Err(TaskError::Compute(e))
        }
        ComputeKind::Invalid | ComputeKind::NotFound | ComputeKind::AlreadyExists => {
            // The Config makes instances Compute refuses: slow its next tries down, so a new
            // hostname does not follow at once, forever.
            backoff::hit(ctx, &Scope::config(&vm.config), "INVALID").await?;
            drop_vm(ctx, vm).await.map(|()| Next::Done)
        }
    }
}
