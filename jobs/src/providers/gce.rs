//! The Compute Engine provider: a machine is an instance, made with `instances.insert` and
//! removed with `instances.delete`, each with a deterministic requestId, its operation recorded
//! on the VM and followed with zoneOperations.get between runs (no worker waits on Compute).
//!
//! * Insert (`create-<hostname>`, then `-<attempt>` after an insert that failed for good); an
//!   operation Compute no longer knows is asked for again with the same insert.
//! * 409 `alreadyExists`: adopt the instance when its labels say it is this VM's.
//! * Quota or stockout: keep the VM (no name churn), back off its (project, zone) (its machine
//!   type in the zone, for a Config with ranked machine types: `backoff::Scope::refused`), record
//!   the error on the Config's status, try again when the backoff ends; a VM not sent yet is made
//!   again at once on another rank or zone while one is open (`ranks::elsewhere`).
//! * Rate limits and 5xx: retry with the queue's backoff.
//! * Held back, not sent (the project's rate limit used up, its breaker open): a wait, not a
//!   failure; nothing is recorded, and the task is looked at again when the way is open.
//! * Invalid request: record the error, drop the VM record (the next expansion builds it again
//!   from the maybe fixed Config) and back the Config off.
//! * Delete (`destroy-<hostname>`, then `-<attempt>`), followed the same way; 404 is done.
//! * New VMs go in bulks while many of a Config's VMs wait, else one by one: the one choice is
//!   `gce_send.rs`'s, for a batch just made as for a VM's first insert; bulks are
//!   `gce_bulk.rs`'s, an insert alone `gce_insert.rs`'s.
//! * Zones are scanned for stopped instances, and a Config's instances whose records were lost
//!   are found from their labels (`gce_scan.rs`).
//! * Per-pool resources: an instance template per Config revision (`gce_template.rs`), which
//!   bulk inserts name as their source; leaked ones are audited per project (`gce_audit.rs`).

use async_trait::async_trait;

use super::contract::{Batch, Health, Proven, Provider};
use super::gce_insert::move_zone;
use super::gce_insert::{delete_request_id, follow, insert_alone};
use crate::catalog::Verdict;
use crate::config::Config;
use crate::config::providers::{Kind, ProviderIds};
use crate::env::Env;
use crate::error::TaskError;
use crate::identity::{self, Refused};
use crate::model::parked::Park;
use crate::model::{ConfigRecord, Vm};
use crate::placement::backoff;
use crate::ports::compute::{ComputeError, Instance, Kind as ComputeKind};
use crate::ports::store::Versioned;
use crate::records::writes::update_vm;
use crate::work::{BulkInsert, Next};

/// The Compute Engine provider (through the process's Compute port).
#[derive(Debug, Clone, Copy, Default)]
pub struct Gce;

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
        ctx.catalog.check(&*ctx.ports.compute, config, ctx.now()).await
    }

    async fn create(&self, ctx: &Env, cur: Versioned<Vm>) -> Result<Next, TaskError> {
        let vm = &cur.value;
        if !vm.batch.is_empty() {
            // Sent in a bulk: its `bulk_insert` follows it.
            ctx.push(&BulkInsert { prefix: vm.config.clone() }).await?;
            return Ok(Next::Done);
        }
        if !vm.operation.is_empty() && vm.insert_sent.is_some() {
            // An insert in flight: where is it now? (Compute may have forgotten it: send it again.)
            if let Some(op) = ctx.ports.compute.operation(vm.project(), vm.zone(), &vm.operation).await? {
                return follow(ctx, cur, op).await;
            }
        }
        if let Some(wait) = backoff::wait_for(ctx, vm).await? {
            if vm.insert_sent.is_none() && crate::placement::ranks::elsewhere(ctx, vm).await? {
                return move_zone(ctx, vm).await;
            }
            return Ok(Next::After(wait));
        }
        let first = match vm.insert_sent.is_none() && vm.insert_attempt == 0 {
            true => ctx.ports.store.config(&vm.config).await?,
            false => None,
        };
        if let Some(cfg) = first
            && let Batch::Together(bulk) =
                self.create_batch(ctx, &cfg.value, std::slice::from_ref(&vm.id)).await?
        {
            // Sent with the Config's other VMs waiting, by `bulk_insert`.
            ctx.push(&bulk).await?;
            return Ok(Next::Done);
        }
        insert_alone(ctx, cur).await
    }

    /// Together while many of the Config's VMs are on their way (`gce_send::batch`).
    async fn create_batch(&self, ctx: &Env, rec: &ConfigRecord, ids: &[String]) -> Result<Batch, TaskError> {
        super::gce_send::batch(ctx, rec, ids).await
    }

    async fn send_together(
        &self,
        ctx: &Env,
        declared: &ProviderIds,
        prefix: &str,
        own: Option<&ConfigRecord>,
    ) -> Result<Next, TaskError> {
        super::gce_send::step(ctx, declared, prefix, own).await
    }

    /// An instance can stop (preempted, a host error) while its bot is still thought alive.
    fn scans_zones(&self) -> bool {
        true
    }

    async fn scan_zone(&self, ctx: &Env, project: &str, zone: &str) -> Result<Next, TaskError> {
        super::gce_scan::scan_zone(ctx, project, zone).await
    }

    /// Its instances carry our labels: the deployment's, the Config's, the VM's.
    fn names_vms(&self) -> bool {
        true
    }

    async fn lost(&self, ctx: &Env, rec: &ConfigRecord) -> Result<Vec<(String, Instance)>, TaskError> {
        super::gce_scan::lost(ctx, rec).await
    }

    /// Its instance templates (`gce_audit.rs`).
    async fn audit_resources(&self, ctx: &Env, project: &str) -> Result<Next, TaskError> {
        super::gce_audit::audit(ctx, project).await
    }

    /// The Config's instance template of its revision (`gce_template.rs`).
    async fn ensure_resources(&self, ctx: &Env, rec: &Versioned<ConfigRecord>) -> Result<Next, TaskError> {
        super::gce_template::ensure(ctx, &rec.value).await
    }

    async fn remove_resources(&self, ctx: &Env, prefix: &str, revision: &str) -> Result<Next, TaskError> {
        super::gce_template::remove(ctx, prefix, revision).await
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
            name => ctx.ports.compute.operation(vm.project(), vm.zone(), name).await?,
        };
        let op = match followed {
            Some(op) => Some(op),
            None => {
                match ctx
                    .ports
                    .compute
                    .delete(vm.project(), vm.zone(), &vm.hostname, &delete_request_id(&vm))
                    .await
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
                if ctx.ports.compute.get(vm.project(), vm.zone(), &vm.hostname).await?.is_some() {
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
        let keys = ctx.ports.keys.keys(false).await.map_err(|_| Refused("keys unavailable"))?;
        let id = match identity::verify(proof, &keys, audience, ctx.now()) {
            Err(Refused("unknown key id")) => {
                let keys = ctx.ports.keys.keys(true).await.map_err(|_| Refused("keys unavailable"))?;
                identity::verify(proof, &keys, audience, ctx.now())?
            }
            verified => verified?,
        };
        let found = ctx.ports.store.vms_by_hostname(std::slice::from_ref(&id.instance_name)).await;
        let vm_id = found.ok().and_then(|mut v| v.pop().flatten()).ok_or(Refused("no VM of that name"))?;
        let vm = ctx.ports.store.vm(&vm_id).await.ok().flatten().ok_or(Refused("no VM of that name"))?;
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
            None => match ctx.ports.compute.get(v.project(), v.zone(), &v.hostname).await {
                Ok(Some(i)) => i.id == id.instance_id && i.belongs_to(&v.id, &ctx.settings.deployment),
                _ => false,
            },
        };
        if !ours {
            return Err(Refused("another incarnation of the name"));
        }
        Ok(Proven { vm, expires: id.expires, instance_id: id.instance_id })
    }

    async fn check(&self, ctx: &Env, vm: &Vm) -> Result<Health, TaskError> {
        Ok(match ctx.ports.compute.get(vm.project(), vm.zone(), &vm.hostname).await? {
            Some(i) if !i.is_down() => Health::Up(i.status),
            Some(i) => Health::Down(i.status),
            None => Health::Gone,
        })
    }
}
