//! Compute Engine's warm pool: a VM parked with `instances.suspend` (or `stop`) and woken with
//! `resume` (or `start`), each request's id deterministic and never reused within an
//! incarnation (`<verb>-<hostname>-<turn>`), the intent recorded on the VM before the request is
//! sent and its operation followed between runs, as inserts and deletes are. Before a request is
//! sent the instance is looked at: one already where it should be is recorded so, one on its way
//! is waited for, so a park cut short or a wake after an unfinished park ends right.

use chrono::{DateTime, Utc};

use crate::env::{Env, request_id};
use crate::error::TaskError;
use crate::model::Vm;
use crate::model::parked::{Park, Parked};
use crate::ports::compute::{ComputeError, Kind as ComputeKind, Operation, Power};
use crate::ports::store::Versioned;
use crate::work::Next;
use crate::{records::writes::update_vm, records::writes::write_vm_at};

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
/// already, or awake). A new request takes the incarnation's next turn.
fn intent(vm: &Vm, how: Park, wake: bool, now: DateTime<Utc>) -> Option<Parked> {
    let turns = vm.power_turns + 1;
    match (&vm.parked, wake) {
        (None, true) => None,
        (None, false) => Some(Parked {
            unknown: Default::default(),
            how,
            since: now,
            done: false,
            waking: None,
            operation: String::new(),
            turns,
        }),
        (Some(p), true) if p.waking.is_none() => {
            Some(Parked { waking: Some(now), operation: String::new(), turns, ..p.clone() })
        }
        (Some(p), false) if p.done || p.waking.is_some() => None,
        (Some(p), _) => Some(p.clone()),
    }
}

/// Where the instance is, for a park (`wake` false) or a wake by `call`: `Some(true)` already
/// there, `Some(false)` on its way (wait), `None` to be asked.
fn arrived(status: &str, call: Power) -> Option<bool> {
    match (call, status) {
        (Power::Suspend, "SUSPENDED") | (Power::Stop, "TERMINATED" | "STOPPED") => Some(true),
        (Power::Resume | Power::Start, "RUNNING" | "STAGING" | "PROVISIONING") => Some(true),
        (_, "SUSPENDING" | "STOPPING" | "PENDING_STOP") => Some(false),
        (Power::Suspend | Power::Stop, "RUNNING") => None,
        (Power::Suspend | Power::Stop, _) => Some(false),
        (Power::Resume | Power::Start, _) => None,
    }
}

/// One step of parking (`wake` false) or waking `cur`: records the intent, then sends the call
/// or follows its operation; [`Next::Done`] once parked (recorded `done`) or awake (parked state
/// cleared, `woken` set).
pub(super) async fn step(ctx: &Env, cur: Versioned<Vm>, how: Park, wake: bool) -> Result<Next, TaskError> {
    let now = ctx.now();
    let Some(p) = intent(&cur.value, how, wake, now) else { return Ok(Next::Done) };
    let hostname = cur.value.hostname.clone();
    let cur = match cur.value.parked.as_ref() == Some(&p) {
        true => cur,
        false => {
            let written = write_vm_at(ctx, cur, |v| {
                v.hostname == hostname && {
                    v.power_turns = v.power_turns.max(p.turns);
                    v.parked = Some(p.clone());
                    true
                }
            })
            .await?;
            // Gone, or another incarnation by now: not this task's to touch.
            match written {
                Some((cur, true)) => cur,
                _ => return Ok(Next::Done),
            }
        }
    };
    let vm = &cur.value;
    let call = power(p.how, wake);
    let since = now - p.waking.unwrap_or(p.since);
    let followed = match p.operation.as_str() {
        "" => None,
        name => ctx.ports.compute.operation(vm.project(), vm.zone(), name).await?,
    };
    let op = match followed {
        Some(op) => op,
        None => {
            let Some(instance) = ctx.ports.compute.get(vm.project(), vm.zone(), &vm.hostname).await? else {
                // Gone: it cannot be parked or woken; it is replaced like any instance that went.
                crate::fleet::lifecycle::replace_down(ctx, vm, None, STAGE).await?;
                return Ok(Next::Done);
            };
            match arrived(&instance.status, call) {
                Some(true) => return finish(ctx, vm, call, p.turns, since).await,
                Some(false) => return Ok(Next::After(ctx.operation_poll(since))),
                None => {}
            }
            let rid = request_id(&format!("{}-{}-{}", call.verb(), vm.hostname, p.turns));
            match ctx.ports.compute.power(vm.project(), vm.zone(), &vm.hostname, call, &rid).await {
                Ok(Some(op)) => op,
                Ok(None) => {
                    crate::fleet::lifecycle::replace_down(ctx, vm, None, STAGE).await?;
                    return Ok(Next::Done);
                }
                Err(e) if e.retry_after.is_some() => return Err(e.into()),
                Err(e) => return failed(ctx, vm, call, p.turns, e, "").await,
            }
        }
    };
    if !op.done {
        record_operation(ctx, vm, p.turns, &op).await?;
        return Ok(Next::After(ctx.operation_poll(since)));
    }
    match op.error {
        Some(e) => failed(ctx, vm, call, p.turns, e, &op.name).await,
        None => finish(ctx, vm, call, p.turns, since).await,
    }
}

/// Records the operation of turn `turns` on `vm`, so the next look follows it.
async fn record_operation(ctx: &Env, vm: &Vm, turns: u32, op: &Operation) -> Result<(), TaskError> {
    if vm.parked.as_ref().is_some_and(|p| p.operation == op.name) {
        return Ok(());
    }
    update_vm(ctx, &vm.id, |v| {
        v.hostname == vm.hostname
            && v.parked.as_mut().is_some_and(|q| {
                q.turns == turns && {
                    q.operation = op.name.clone();
                    true
                }
            })
    })
    .await
    .map(drop)
}

/// Turn `turns` failed with `e`: recorded, and the next try takes a new turn (the failed request
/// stays bound to its id).
async fn failed(
    ctx: &Env,
    vm: &Vm,
    call: Power,
    turns: u32,
    e: ComputeError,
    op: &str,
) -> Result<Next, TaskError> {
    ctx.metrics.instance_op(vm, call.verb(), e.kind.as_str(), &e.code);
    ctx.record_vm(vm, STAGE, &e.code, &e.message, op).await?;
    update_vm(ctx, &vm.id, |v| {
        v.hostname == vm.hostname && {
            let next = v.power_turns.max(turns) + 1;
            v.parked.as_mut().is_some_and(|q| {
                q.turns == turns && {
                    q.turns = next;
                    q.operation.clear();
                    true
                }
            }) && {
                v.power_turns = next;
                true
            }
        }
    })
    .await?;
    Err(TaskError::Compute(ComputeError { kind: ComputeKind::Transient, ..e }))
}

/// Turn `turns` (of `call`) is done: parked (`done`), or awake (parked state cleared, `woken` set).
async fn finish(
    ctx: &Env,
    vm: &Vm,
    call: Power,
    turns: u32,
    since: chrono::TimeDelta,
) -> Result<Next, TaskError> {
    let now = ctx.now();
    let wake = matches!(call, Power::Resume | Power::Start);
    update_vm(ctx, &vm.id, |v| {
        v.hostname == vm.hostname && v.parked.as_ref().is_some_and(|q| q.turns == turns) && {
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
    ctx.metrics.instance_op(vm, call.verb(), "ok", "");
    let what = if wake { "woken from the warm pool" } else { "parked in the warm pool" };
    let seconds = since.num_milliseconds() as f64 / 1000.0;
    tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), seconds, "{what}");
    Ok(Next::Done)
}
