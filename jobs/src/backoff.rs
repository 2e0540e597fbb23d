//! Backoffs of a scope where creating instances fails for a while: a (project, zone) out of
//! quota or capacity, or a Config whose instances Compute refuses as invalid. Exponential
//! (`timing.backoff_base` doubling to `backoff_cap`), one step per wave of failures, cleared by a
//! success. The one place these rules live.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{Backoff, Vm};

/// What is backed off: stored as the backoff's (project, zone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope(pub String, pub String);

impl Scope {
    /// The (project, zone) of a VM's instance.
    pub fn zone(vm: &Vm) -> Self {
        Scope(vm.project().to_owned(), vm.zone().to_owned())
    }

    /// A Config (its instances are refused as invalid): no project, the prefix as zone.
    pub fn config(prefix: &str) -> Self {
        Scope(String::new(), prefix.to_owned())
    }

    /// Both scopes an insert of `vm` depends on: its zone and its Config.
    pub fn of(vm: &Vm) -> [Self; 2] {
        [Scope::zone(vm), Scope::config(&vm.config)]
    }

    /// As the store names it: (project, zone).
    pub fn pair(&self) -> (&str, &str) {
        (&self.0, &self.1)
    }
}

/// Time left in a backoff (at least a second).
pub fn left(b: &Backoff, now: DateTime<Utc>) -> Duration {
    (b.until - now).to_std().unwrap_or_default().max(Duration::from_secs(1))
}

/// The active backoff of `scope`, if any.
pub async fn active(ctx: &Ctx, scope: &Scope) -> Result<Option<Backoff>, TaskError> {
    let now = ctx.now();
    Ok(ctx.store.backoff(&scope.0, &scope.1).await?.filter(|b| b.until > now))
}

/// The longest time left among the active backoffs of a VM's zone and Config (one read).
pub async fn wait_for(ctx: &Ctx, vm: &Vm) -> Result<Option<Duration>, TaskError> {
    let now = ctx.now();
    let found = ctx.store.backoffs(&Scope::of(vm).each_ref().map(Scope::pair)).await?;
    Ok(found.iter().flatten().filter(|b| b.until > now).map(|b| left(b, now)).max())
}

/// A failure in `scope`: backs it off one step more, unless another failure of the same wave
/// already did. Returns how long until it may be tried again.
pub async fn hit(ctx: &Ctx, scope: &Scope, reason: &str) -> Result<Duration, TaskError> {
    let now = ctx.now();
    let prev = ctx.store.backoff(&scope.0, &scope.1).await?;
    if let Some(b) = prev.as_ref().filter(|b| b.until > now) {
        return Ok(left(b, now));
    }
    let failures = prev.map_or(1, |b| b.failures + 1);
    let t = &ctx.timing;
    let secs = t.backoff_base.0.saturating_mul(1 << (failures - 1).min(20)).min(t.backoff_cap.0.max(1));
    let b = Backoff {
        project: scope.0.clone(),
        zone: scope.1.clone(),
        until: now + crate::config::Secs(secs).chrono(),
        failures,
        reason: reason.to_owned(),
    };
    ctx.store.set_backoff(&scope.0, &scope.1, Some(&b)).await?;
    Ok(Duration::from_secs(secs))
}

/// A success in `scope`: its backoff ends.
pub async fn clear(ctx: &Ctx, scope: &Scope) -> Result<(), TaskError> {
    Ok(ctx.store.set_backoff(&scope.0, &scope.1, None).await?)
}

/// An instance of `vm` was made: the backoffs of its zone and its Config end (one write).
pub async fn clear_for(ctx: &Ctx, vm: &Vm) -> Result<(), TaskError> {
    Ok(ctx.store.clear_backoffs(&Scope::of(vm).each_ref().map(Scope::pair)).await?)
}
