//! Compute Engine's warm pool: a VM parked with `instances.suspend` (or `stop`) and woken with
//! `resume` (or `start`), each request's id deterministic (`<verb>-<hostname>-<turn>`), the
//! intent recorded on the VM before the request is sent and its operation followed between
//! runs, as inserts and deletes are.

use crate::env::{Env, request_id};
use crate::error::TaskError;
use crate::model::Vm;
use crate::model::parked::{Park, Parked};
use crate::ports::compute::{ComputeError, Kind as ComputeKind, Power};
use crate::ports::store::Versioned;
use crate::work::Next;
use crate::writes::{update_vm, write_vm_at};

/// The stage errors are recorded under (the handler's queue).
const STAGE: &str = "park_vm";

/// The call that parks (`how`) or wakes a VM.
fn power(how: Park, wake: bool) -> Power {
    match (how, wake) {
        (Park::Suspend, false) => Power::Suspend,
        (Park::Suspend, true) => Power::Resume,
        (Park::Stop, false) => Power::Stop,
        (Park::Stop, true) => Power::Start,
    }
}

/// The parked state `vm` moves to for this step, or `None` when there is nothing to do (parked
/// already, or awake).
fn intent(vm: &Vm, how: Park, wake: bool, now: chrono::DateTime<chrono::Utc>) -> Option<Parked> {
    match (&vm.parked, wake) {
        (None, true) => None,
        (None, false) => {
            Some(Parked { how, since: now, done: false, waking: None, operation: String::new(), turns: 1 })
        }
        (Some(p), true) if p.waking.is_none() => {
            Some(Parked { waking: Some(now), operation: String::new(), turns: p.turns + 1, ..p.clone() })
        }
        (Some(p), false) if p.done || p.waking.is_some() => None,
        (Some(p), _) => Some(p.clone()),
    }
}

/// One step of parking (`wake` false) or waking `cur`: records the intent, then sends the call
/// or follows its operation; [`Next::Done`] once parked (recorded `done`) or awake (parked state
/// cleared).
pub(super) async fn step(ctx: &Env, cur: Versioned<Vm>, how: Park, wake: bool) -> Result<Next, TaskError> {
    let now = ctx.now();
    let Some(p) = intent(&cur.value, how, wake, now) else { return Ok(Next::Done) };
    let hostname = cur.value.hostname.clone();
    let cur = match cur.value.parked.as_ref() == Some(&p) {
        true => cur,
        false => {
            let written = write_vm_at(ctx, cur, |v| {
                v.hostname == hostname && {
                    v.parked = Some(p.clone());
                    true
                }
            })
            .await?;
            match written {
                Some((cur, _)) => cur,
                None => return Ok(Next::Done),
            }
        }
    };
    let vm = &cur.value;
    let call = power(p.how, wake);
    let followed = match p.operation.as_str() {
        "" => None,
        name => ctx.compute.operation(vm.project(), vm.zone(), name).await?,
    };
    let op = match followed {
        Some(op) => op,
        None => {
            // Named by the park it belongs to (its start) and the turn within it: a VM parked
            // again after a wake asks anew instead of replaying its first park's operation.
            let park = p.since.timestamp_millis();
            let rid = request_id(&format!("{}-{}-{park}-{}", call.verb(), vm.hostname, p.turns));
            match ctx.compute.power(vm.project(), vm.zone(), &vm.hostname, call, &rid).await {
                Ok(Some(op)) => op,
                // Gone: it cannot be woken; it is replaced like any instance that went away.
                Ok(None) => {
                    crate::lifecycle::replace_down(ctx, vm, None, STAGE).await?;
                    return Ok(Next::Done);
                }
                Err(e) if e.retry_after.is_some() => return Err(e.into()),
                Err(e) => {
                    ctx.metrics.instance_op(vm, call.verb(), e.kind.as_str(), &e.code);
                    ctx.record_vm(vm, STAGE, &e.code, &e.message, "").await?;
                    return Err(e.into());
                }
            }
        }
    };
    let since = now - p.waking.unwrap_or(p.since);
    let turns = p.turns;
    if !op.done {
        if op.name != p.operation {
            update_vm(ctx, &vm.id, |v| {
                v.hostname == hostname
                    && v.parked.as_mut().is_some_and(|q| {
                        q.turns == turns && {
                            q.operation = op.name.clone();
                            true
                        }
                    })
            })
            .await?;
        }
        return Ok(Next::After(ctx.operation_poll(since)));
    }
    if let Some(e) = op.error {
        ctx.metrics.instance_op(vm, call.verb(), e.kind.as_str(), &e.code);
        ctx.record_vm(vm, STAGE, &e.code, &e.message, &op.name).await?;
        // The failed operation stays bound to its requestId: the next try needs a new one.
        update_vm(ctx, &vm.id, |v| {
            v.hostname == hostname
                && v.parked.as_mut().is_some_and(|q| {
                    q.turns == turns && {
                        q.turns += 1;
                        q.operation.clear();
                        true
                    }
                })
        })
        .await?;
        return Err(TaskError::Compute(ComputeError { kind: ComputeKind::Transient, ..e }));
    }
    ctx.metrics.instance_op(vm, call.verb(), "ok", "");
    update_vm(ctx, &vm.id, |v| {
        v.hostname == hostname && v.parked.as_ref().is_some_and(|q| q.turns == turns) && {
            match wake {
                true => {
                    v.parked = None;
                    v.woken = Some(now);
                }
                false => {
                    if let Some(q) = v.parked.as_mut() {
                        q.done = true;
                        q.operation.clear();
                    }
                }
            }
            true
        }
    })
    .await?;
    tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), seconds = since.num_milliseconds() as f64 / 1000.0, "{}", if wake { "woken from the warm pool" } else { "parked in the warm pool" });
    Ok(Next::Done)
}
