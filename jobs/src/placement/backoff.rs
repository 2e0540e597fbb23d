//! Backoffs of a scope where creating instances fails for a while: a (project, zone) out of
//! quota or capacity (or one machine type in it, for a Config with ranked machine types; or only
//! its Spot capacity, for Spot VMs), or a
//! Config whose instances Compute refuses as invalid. Exponential
//! (`timing.backoff_base` doubling to `backoff_cap`), one step per wave of failures, cleared by a
//! success. A task that meets one waits for its end (no attempt spent). Logged once per change
//! of state: its start (WARN; a further step INFO), a summary of the tasks it held back every
//! minute while it lasts, its end (INFO); a task held back is said at DEBUG. The one place these
//! rules live.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::env::Env;
use crate::episodes::Held;
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

    /// One machine type in a (project, zone): the zone `<zone>/<machine type>` (the type's name
    /// without its path), `<zone>/<machine type>/spot` for its Spot capacity.
    fn machine_type(project: &str, zone: &str, machine_type: &str, spot: bool) -> Self {
        let t = crate::config::short_machine_type(machine_type);
        Scope(project.to_owned(), format!("{zone}/{t}{}", if spot { "/spot" } else { "" }))
    }

    /// The Spot capacity of a (project, zone): the zone `<zone>/spot`.
    fn spot(project: &str, zone: &str) -> Self {
        Scope(project.to_owned(), format!("{zone}/spot"))
    }

    /// The one rule of what a refusal for want of capacity or quota of an insert in (`project`,
    /// `zone`) backs off: the machine type there when the VM has a rank (`ranked`: its Config
    /// lists fallback machine types, so the next rank is tried there at once), else the whole
    /// zone; for a Spot VM, only the Spot capacity of either, so standard VMs (a failover's) are
    /// not held back by it.
    pub fn refusal(project: &str, zone: &str, ranked: Option<&str>, spot: bool) -> Self {
        match ranked {
            Some(machine_type) => Scope::machine_type(project, zone, machine_type, spot),
            None if spot => Scope::spot(project, zone),
            None => Scope(project.to_owned(), zone.to_owned()),
        }
    }

    /// [`Scope::refusal`] of `vm`'s insert.
    pub fn refused(vm: &Vm) -> Self {
        let ranked = vm.rank.map(|_| vm.attributes.machine_type.as_str());
        Scope::refusal(vm.project(), vm.zone(), ranked, vm.attributes.preemptible())
    }

    /// The scopes an insert of `vm` depends on: its zone, its Config, and what a refusal of it
    /// backs off when that is narrower than the zone (its machine type there, its Spot capacity).
    pub fn of(vm: &Vm) -> Vec<Self> {
        let mut out = vec![Scope::zone(vm), Scope::config(&vm.config)];
        let refused = Scope::refused(vm);
        if refused != out[0] {
            out.push(refused);
        }
        out
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
pub async fn active(ctx: &Env, scope: &Scope) -> Result<Option<Backoff>, TaskError> {
    let now = ctx.now();
    Ok(ctx.ports.store.backoff(&scope.0, &scope.1).await?.filter(|b| b.until > now))
}

/// The longest time left among the active backoffs of a VM's zone, Config and (with a rank)
/// machine type in its zone (one read); the task waits that long (counted for the backoff's
/// summary, said at DEBUG).
pub async fn wait_for(ctx: &Env, vm: &Vm) -> Result<Option<Duration>, TaskError> {
    let now = ctx.now();
    let scopes = Scope::of(vm);
    let found = ctx.ports.store.backoffs(&scopes.iter().map(Scope::pair).collect::<Vec<_>>()).await?;
    let Some(b) = found.iter().flatten().filter(|b| b.until > now).max_by_key(|b| b.until) else {
        return Ok(None);
    };
    let wait = left(b, now);
    let (key, what) = named(&b.project, &b.zone);
    let (project, zone, reason) = (&b.project, &b.zone, &b.reason);
    match ctx.episodes.held(&key, tokio::time::Instant::now()) {
        Held::Summary { held, over } => {
            tracing::info!(project, zone, reason, left = ?wait, over = ?over, "{what} still backed off: {held} tasks held back")
        }
        Held::Began | Held::Quiet => {
            tracing::debug!(config = %vm.config, vm = %vm.id, project, zone, reason, left = ?wait, "{what} backed off: the VM waits")
        }
    }
    Ok(Some(wait))
}

/// The key of a backoff's episode and how logs name its scope.
fn named(project: &str, zone: &str) -> (String, String) {
    match (project, zone.contains('/')) {
        ("", _) => (format!("backoff {zone}"), format!("Config {zone}")),
        (p, true) if zone.ends_with("/spot") => {
            (format!("backoff {p}/{zone}"), format!("Spot capacity {p}/{zone}"))
        }
        (p, true) => (format!("backoff {p}/{zone}"), format!("machine type {p}/{zone}")),
        (p, false) => (format!("backoff {p}/{zone}"), format!("zone {p}/{zone}")),
    }
}

/// A failure in `scope`: backs it off one step more, unless another failure of the same wave
/// already did. Returns how long until it may be tried again.
pub async fn hit(ctx: &Env, scope: &Scope, reason: &str) -> Result<Duration, TaskError> {
    let now = ctx.now();
    let prev = ctx.ports.store.backoff(&scope.0, &scope.1).await?;
    if let Some(b) = prev.as_ref().filter(|b| b.until > now) {
        return Ok(left(b, now));
    }
    let failures = prev.map_or(1, |b| b.failures + 1);
    let t = &ctx.settings.timing;
    let secs = t.backoff_base.0.saturating_mul(1 << (failures - 1).min(20)).min(t.backoff_cap.0.max(1));
    let b = Backoff {
        unknown: Default::default(),
        project: scope.0.clone(),
        zone: scope.1.clone(),
        until: now + crate::config::Secs(secs).chrono(),
        failures,
        reason: reason.to_owned(),
    };
    ctx.ports.store.set_backoff(&scope.0, &scope.1, Some(&b)).await?;
    let (_, what) = named(&scope.0, &scope.1);
    let (project, zone) = scope.pair();
    if failures == 1 {
        tracing::warn!(
            project,
            zone,
            reason,
            secs,
            "{what} backed off: no instance is made there until it ends"
        );
    } else {
        tracing::info!(project, zone, reason, secs, failures, "{what} backed off again");
    }
    Ok(Duration::from_secs(secs))
}

/// A success in `scope`: its backoff ends.
pub async fn clear(ctx: &Env, scope: &Scope) -> Result<(), TaskError> {
    Ok(ctx.ports.store.set_backoff(&scope.0, &scope.1, None).await?)
}

/// An instance of `vm` was made: the backoffs of its Config and of what a refusal of it would
/// have backed off (its zone; or its machine type there, or its Spot capacity) end: a Spot VM
/// made says nothing of standard capacity, nor one machine type of another (one read; a write
/// and a line each when there were any).
pub async fn clear_for(ctx: &Env, vm: &Vm) -> Result<(), TaskError> {
    let scopes = [Scope::config(&vm.config), Scope::refused(vm)];
    let pairs: Vec<(&str, &str)> = scopes.iter().map(Scope::pair).collect();
    let found = ctx.ports.store.backoffs(&pairs).await?;
    if found.iter().all(Option::is_none) {
        return Ok(());
    }
    ctx.ports.store.clear_backoffs(&pairs).await?;
    for b in found.iter().flatten() {
        let (key, what) = named(&b.project, &b.zone);
        let held = ctx.episodes.end(&key, tokio::time::Instant::now()).map_or(0, |e| e.held);
        let (project, zone) = (&b.project, &b.zone);
        tracing::info!(project, zone, reason = %b.reason, held, "{what} backoff over: an instance was made");
    }
    Ok(())
}
