//! Metering, the one way VM records are written: a write works out what the VM is billed as now
//! (`Vm::billed`), keeps its meter while that is unchanged, and otherwise opens a new
//! one (since now, at the price book's rate for that state) and hands the store the ledger
//! changes that close the old one, applied in the same transaction as the write. The
//! compare-and-set makes each change happen once: a write that loses its race changes nothing.

use chrono::{DateTime, Utc};

use crate::config::region_of;
use crate::env::Env;
use crate::error::TaskError;
use crate::model::Vm;
use crate::ports::store::{Expect, Versioned};
use crate::prices::Rates;
use crate::{model::ledger::Billed, model::ledger::MICROS, model::ledger::Metered, model::ledger::spend};

/// What VM `vm` costs per hour billed as `state`, in µUSD, at `rates`: its machine type (Spot or
/// standard as it was made) or its saved state, and its disks. What cannot be priced adds
/// nothing here; status names it unpriced.
pub fn rate(rates: &Rates, vm: &Vm, state: Billed) -> u64 {
    let a = &vm.attributes;
    let region = region_of(vm.zone());
    let machine = match state {
        Billed::Running => rates.machine_per_hour(&a.machine_type, region, a.preemptible()),
        Billed::Suspended => rates.suspended_per_hour(&a.machine_type, region),
        Billed::Stopped => Ok(0.0),
    };
    let disks: f64 = a
        .disk
        .iter()
        .filter(|d| d.size > 0)
        .map(|d| rates.disk_per_hour(&d.kind, d.size as f64, region).unwrap_or(0.0))
        .sum();
    ((machine.unwrap_or(0.0) + disks) * MICROS).round().max(0.0) as u64
}

/// The meter `vm` gets when written at `now` over a record metered `old`: `old` while it is
/// billed the same, a new one from `now` otherwise (none while nothing is billed).
async fn next(
    ctx: &Env,
    old: Option<&Metered>,
    vm: &Vm,
    now: DateTime<Utc>,
) -> Result<Option<Metered>, TaskError> {
    let Some(state) = vm.billed() else { return Ok(None) };
    if let Some(o) = old.filter(|o| o.state == state) {
        return Ok(Some(o.clone()));
    }
    let rates = ctx.catalog.rates(ctx.ports.store.as_ref(), now).await?;
    Ok(Some(Metered { state, since: now, rate: rate(&rates, vm, state), unknown: Default::default() }))
}

/// Writes `vm` if `expect` holds, its meter moved on from `old` (the meter of the record as read
/// at the version expected; none for a new record) and the ledger changed with it.
pub async fn put(ctx: &Env, old: Option<&Metered>, vm: &mut Vm, expect: Expect) -> Result<bool, TaskError> {
    let now = ctx.now();
    vm.meter = next(ctx, old, vm, now).await?;
    let changes = spend(old, vm.meter.as_ref(), now);
    Ok(ctx.ports.store.put_vm_spending(vm, expect, &changes).await?)
}

/// Deletes VM record `cur` at its version, closing its meter.
pub async fn delete(ctx: &Env, cur: &Versioned<Vm>) -> Result<bool, TaskError> {
    let changes = spend(cur.value.meter.as_ref(), None, ctx.now());
    Ok(ctx.ports.store.delete_vm_spending(&cur.value.id, cur.version, &changes).await?)
}

#[cfg(test)]
mod tests;
