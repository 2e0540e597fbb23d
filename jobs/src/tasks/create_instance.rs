//! `create_instance`: makes a VM's machine and records it, through the VM's provider
//! (`providers/`; Compute Engine: `providers/gce.rs`, where inserts, operations, adoption and
//! the handling of quota, stockout and invalid requests live).
//!
//! * Gone, or its machine already recorded: nothing to make (the bot is looked at).
//! * Not sent yet and no longer wanted (the amount dropped, drained): the record is dropped,
//!   since nothing exists to clean up.
//! * Paused Config: a VM not yet sent waits (resuming pushes this task again); one already
//!   sent is followed to its end.
//! * Otherwise its provider takes one step; `created` records the machine once it exists.

use crate::tasks::ManageBot;

use crate::backoff;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{Placed, Vm};
use crate::ports::store::Versioned;
use crate::tasks::Next;
use crate::tasks::write_vm_at;
use crate::telemetry::Stage;

task!(
    /// Create (or adopt) the instance of a VM.
    CreateInstance, "create_instance", { /// VM id.
    id }, |self| self.id.clone()
);

/// The stage its errors are recorded under.
pub const STAGE: &str = "create_instance";

/// Handles one task.
pub async fn run(ctx: &Ctx, t: CreateInstance) -> Result<Next, TaskError> {
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = &cur.value;
    if vm.instance.is_some() {
        ctx.push(&ManageBot { id: t.id }).await?;
        return Ok(Next::Done);
    }
    if vm.insert_sent.is_none() {
        // Not sent yet: still wanted? (The amount may have dropped since it was made.)
        let cfg = ctx.store.config(&vm.config).await?.filter(|c| ctx.providers.keeps(&c.value, vm));
        let Some(cfg) = cfg.filter(|_| !vm.drained) else {
            // Never sent to GCE: there is nothing to clean up.
            let unsent = |v: &Vm| v.insert_sent.is_none();
            return crate::tasks::drop_uncreated(ctx, &vm.id, unsent).await.map(|()| Next::Done);
        };
        if ctx.held(&cfg.value, Some(&vm.id)).await?.is_some() {
            return Ok(Next::Done);
        }
        // No machine is told of a server the settings do not list (a record from before them).
        if let Err(why) = ctx.trust.server(&vm.swarming) {
            let msg = format!("VM {} not made: its Swarming {why}", vm.id);
            ctx.record_once(&vm.config, STAGE, "untrusted", &msg).await?;
            return Ok(Next::Done);
        }
    }
    ctx.providers.get(ctx, &vm.provider).await?.create(ctx, cur).await
}

/// Records `placed` as `cur`'s machine (once per incarnation), and starts watching its bot.
pub async fn created(ctx: &Ctx, cur: Versioned<Vm>, placed: Placed) -> Result<(), TaskError> {
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
    if let Some((Versioned { value: v, .. }, wrote)) =
        written.as_ref().filter(|(v, _)| v.value.url() == Some(placed.url.as_str()))
    {
        let vm = v;
        let fixed = is_static(ctx, vm);
        // Only the run that recorded the instance counts it (another may have recorded it first);
        // a static machine is recorded, not inserted.
        if *wrote && !fixed {
            ctx.telemetry.instance_op(vm, "insert", "ok", "");
            if let Some(sent) = v.insert_sent {
                ctx.telemetry.lifecycle(vm, Stage::InsertToCreated, sent, ctx.now());
            }
        }
        backoff::clear_for(ctx, vm).await?;
        let what = if fixed { "static machine" } else { "instance" };
        tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "{what} created");
        ctx.resolved(&vm.config, &[STAGE]).await?;
        // Its bot cannot be there yet: the first look comes soon after boot.
        let first = ctx.look_again(chrono::Duration::zero());
        ctx.push_at(&ManageBot { id: vm.id.clone() }, gce_backend_queues::When::After(first)).await?;
    }
    Ok(())
}

/// True when a VM's machine is a static one (only recorded and released, never made or
/// deleted): logs call it so.
pub fn is_static(ctx: &Ctx, vm: &Vm) -> bool {
    ctx.providers.kind(&vm.provider) == Some(crate::providers::Kind::Static)
}

/// Drops this incarnation's record (it has no instance), so a new hostname follows.
pub async fn drop_vm(ctx: &Ctx, vm: &Vm) -> Result<(), TaskError> {
    crate::tasks::drop_uncreated(ctx, &vm.id, |v| v.hostname == vm.hostname).await
}

#[cfg(test)]
mod tests;
