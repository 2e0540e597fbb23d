//! The Compute Engine provider: a machine is an instance, made with `instances.insert` and
//! removed with `instances.delete`, each with a deterministic requestId, its operation recorded
//! on the VM and followed with zoneOperations.get between runs (no worker waits on Compute).
//!
//! * Insert (`create-<hostname>`, then `-<attempt>` after an insert that failed for good); an
//!   operation Compute no longer knows is asked for again with the same insert.
//! * 409 `alreadyExists`: adopt the instance when its labels say it is this VM's.
//! * Quota or stockout: keep the VM (no name churn), back off its (project, zone), record the
//!   error on the Config's status, try again when the backoff ends.
//! * Rate limits and 5xx: retry with the queue's backoff.
//! * Held back, not sent (the project's rate limit used up, its breaker open): a wait, not a
//!   failure; nothing is recorded, and the task is looked at again when the way is open.
//! * Invalid request: record the error, drop the VM record (the next expansion builds it again
//!   from the maybe fixed Config) and back the Config off.
//! * Delete (`destroy-<hostname>`, then `-<attempt>`), followed the same way; 404 is done.

use async_trait::async_trait;

use super::contract::{Health, Proven, Provider};
use crate::backoff::{self, Scope};
use crate::catalog::Verdict;
use crate::config::providers::Kind;
use crate::config::{Config, Metadata, labels};
use crate::env::{Env, request_id};
use crate::error::TaskError;
use crate::identity::{self, Refused};
use crate::lifecycle::{created, drop_vm};
use crate::model::Vm;
use crate::model::parked::Park;
use crate::ports::compute::{ComputeError, InstanceSpec, Kind as ComputeKind, Operation};
use crate::ports::store::Versioned;
use crate::work::CreateInstance;
use gce_backend_queues::Task;

/// The stage its errors are recorded under (its queue's, as the handler's).
const STAGE: &str = CreateInstance::QUEUE;
use crate::metrics::Stage;
use crate::work::Next;
use crate::writes::{update_vm, write_vm_at};

/// The Compute Engine provider (through the process's Compute port).
#[derive(Debug, Clone, Copy, Default)]
pub struct Gce;

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

#[async_trait]
impl Provider for Gce {
    fn kind(&self) -> Kind {
        Kind::Gce
    }

    /// Nothing to make: instances carry our labels, and the project is the Config's.
    async fn setup(&self, _ctx: &Env) -> Result<(), TaskError> {
        Ok(())
    }

    /// The zone and disk types exist in the project (asked once and cached by the catalog).
    async fn validate(&self, ctx: &Env, config: &Config) -> Verdict {
        ctx.catalog.check(&*ctx.compute, config, ctx.now()).await
    }

    async fn create(&self, ctx: &Env, cur: Versioned<Vm>) -> Result<Next, TaskError> {
        let vm = &cur.value;
        if !vm.operation.is_empty() && vm.insert_sent.is_some() {
            // An insert in flight: where is it now? (Compute may have forgotten it: send it again.)
            if let Some(op) = ctx.compute.operation(vm.project(), vm.zone(), &vm.operation).await? {
                return follow(ctx, cur, op).await;
            }
        }
        let now = ctx.now();
        if let Some(wait) = backoff::wait_for(ctx, vm).await? {
            if vm.insert_sent.is_none() && crate::zones::elsewhere(ctx, vm).await? {
                return move_zone(ctx, vm).await;
            }
            return Ok(Next::After(wait));
        }
        let (cur, sending) = match vm.insert_sent {
            Some(_) => (cur, false),
            None => match write_vm_at(ctx, cur, |v| {
                v.insert_sent.is_none() && {
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
            .compute
            .insert(vm.project(), vm.zone(), &rid, &instance_spec(vm, &ctx.deployment))
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

    async fn park(&self, ctx: &Env, vm: Versioned<Vm>, how: Park) -> Result<Next, TaskError> {
        super::power::step(ctx, vm, how, false).await
    }

    async fn wake(&self, ctx: &Env, vm: Versioned<Vm>) -> Result<Next, TaskError> {
        let how = vm.value.parked.as_ref().map_or(Park::Suspend, |p| p.how);
        super::power::step(ctx, vm, how, true).await
    }

    async fn remove(&self, ctx: &Env, vm: Vm) -> Result<Next, TaskError> {
        let now = ctx.now();
        // A delete in flight: where is it now? (Compute may have forgotten it: send it again.)
        let followed = match vm.operation.as_str() {
            "" => None,
            name => ctx.compute.operation(vm.project(), vm.zone(), name).await?,
        };
        let op = match followed {
            Some(op) => Some(op),
            None => {
                match ctx.compute.delete(vm.project(), vm.zone(), &vm.hostname, &delete_request_id(&vm)).await
                {
                    Ok(op) => op,
                    // Held back (the project's rate limit, or its open breaker): a wait, not a
                    // failure; nothing to record.
                    Err(e) if e.retry_after.is_some() => return Err(e.into()),
                    Err(e) => {
                        ctx.metrics.instance_op(&vm, "delete", e.kind.as_str(), &e.code);
                        ctx.record_vm(&vm, "destroy_instance", &e.code, &e.message, "").await?;
                        return Err(e.into());
                    }
                }
            }
        };
        if let Some(op) = op {
            if !op.done {
                if op.name != vm.operation {
                    update_vm(ctx, &vm.id, |v| {
                        v.instance == vm.instance && v.destroy_attempt == vm.destroy_attempt && {
                            v.operation = op.name.clone();
                            true
                        }
                    })
                    .await?;
                }
                let since = now - vm.destroying.unwrap_or(now);
                return Ok(Next::After(ctx.operation_poll(since)));
            }
            if let Some(e) = op.error {
                ctx.record_vm(&vm, "destroy_instance", &e.code, &e.message, &op.name).await?;
                if ctx.compute.get(vm.project(), vm.zone(), &vm.hostname).await?.is_some() {
                    ctx.metrics.instance_op(&vm, "delete", e.kind.as_str(), &e.code);
                    // The failed operation stays bound to its requestId: the next try needs a new one.
                    update_vm(ctx, &vm.id, |v| {
                        v.instance == vm.instance && v.destroy_attempt == vm.destroy_attempt && {
                            v.destroy_attempt += 1;
                            v.operation.clear();
                            true
                        }
                    })
                    .await?;
                    return Err(TaskError::Compute(ComputeError { kind: ComputeKind::Transient, ..e }));
                }
                // Gone anyway.
            }
        }
        Ok(Next::Done)
    }

    /// The token's signature, issuer, audience and time; then a VM of ours whose hostname is
    /// the instance's name, in its project and zone, whose instance has the token's instance
    /// id (as recorded; before it is recorded, as Compute states it, with our deployment's and
    /// this VM's labels), and that has not registered yet.
    async fn identify(&self, ctx: &Env, proof: &str, audience: &str) -> Result<Proven, Refused> {
        let keys = ctx.keys.keys(false).await.map_err(|_| Refused("keys unavailable"))?;
        let id = match identity::verify(proof, &keys, audience, ctx.now()) {
            Err(Refused("unknown key id")) => {
                let keys = ctx.keys.keys(true).await.map_err(|_| Refused("keys unavailable"))?;
                identity::verify(proof, &keys, audience, ctx.now())?
            }
            verified => verified?,
        };
        let found = ctx.store.vms_by_hostname(std::slice::from_ref(&id.instance_name)).await;
        let vm_id = found.ok().and_then(|mut v| v.pop().flatten()).ok_or(Refused("no VM of that name"))?;
        let vm = ctx.store.vm(&vm_id).await.ok().flatten().ok_or(Refused("no VM of that name"))?;
        let v = &vm.value;
        if v.hostname != id.instance_name || v.project() != id.project || v.zone() != id.zone {
            return Err(Refused("another instance"));
        }
        if v.registered.is_some() {
            return Err(Refused("already registered"));
        }
        let recorded = v.instance.as_ref().map(|p| p.instance_id.as_str()).filter(|i| !i.is_empty());
        let ours = match recorded {
            Some(recorded) => recorded == id.instance_id,
            // Not recorded yet (the insert's operation still runs): ask Compute.
            None => match ctx.compute.get(v.project(), v.zone(), &v.hostname).await {
                Ok(Some(i)) => i.id == id.instance_id && i.belongs_to(&v.id, &ctx.deployment),
                _ => false,
            },
        };
        if !ours {
            return Err(Refused("another incarnation of the name"));
        }
        Ok(Proven { vm, expires: id.expires, instance_id: id.instance_id })
    }

    async fn check(&self, ctx: &Env, vm: &Vm) -> Result<Health, TaskError> {
        Ok(match ctx.compute.get(vm.project(), vm.zone(), &vm.hostname).await? {
            Some(i) if !i.is_down() => Health::Up(i.status),
            Some(i) => Health::Down(i.status),
            None => Health::Gone,
        })
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
    match ctx.compute.get(vm.project(), vm.zone(), &vm.hostname).await? {
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
    let inst = ctx.compute.get(vm.project(), vm.zone(), &vm.hostname).await?;
    match inst {
        Some(inst) if inst.belongs_to(&vm.id, &ctx.deployment) => {
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
/// again at once in another zone.
async fn move_zone(ctx: &Env, vm: &Vm) -> Result<Next, TaskError> {
    tracing::info!(config = %vm.config, vm = %vm.id, zone = %vm.zone(), "zone backed off: the VM is made again in another zone");
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
            crate::spot::refused(ctx, vm, &e.code, op).await?;
            let wait = backoff::hit(ctx, &Scope::zone(vm), &e.code).await?;
            // A multi-zone Config: made again at once in a zone that has room.
            if crate::zones::elsewhere(ctx, vm).await? {
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
