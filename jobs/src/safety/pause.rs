//! Pause and hold: the one rule of what holds back making or replacing a Config's VMs, and
//! what wakes the work a lifted pause held back.
//!
//! A Config is **paused** by its own pause, else by the global one. While paused,
//! `expand_config` and `create_vm` make no VM record, `create_instance` sends no insert for a VM
//! not yet sent (it waits; resuming pushes it again), and `manage_bot` does not retire a healthy
//! VM past its deadline. Draining, deleting, cleaning up faulty VMs (destroyed, not replaced),
//! bot cleanup and audits go on. A Config is **held** when paused, or while its circuit breaker
//! is open (for any VM but its canary).

use chrono::{DateTime, Utc};

use crate::env::Env;
use crate::error::TaskError;
use crate::model::breaker_state::BY;
use crate::model::{ConfigRecord, Pause};
use crate::naming::parse_id;
use crate::ports::store::{Store, StoreError, VmIndex};
use crate::work::{CreateInstance, ExpandConfig, ManageBot};

/// The global pause. A record that does not decode counts as a pause (failing safe: nothing is
/// created until an operator lifts or sets it again), with a WARN.
pub async fn global(store: &dyn Store) -> Result<Option<Pause>, TaskError> {
    match store.global_pause().await {
        Ok(p) => Ok(p),
        Err(StoreError::Corrupt { error, .. }) => {
            tracing::warn!(error = %error, "the global pause record does not decode: every Config counts as paused until it is set or lifted again");
            let reason = format!("the global pause record does not decode ({error}); set or lift it again");
            Ok(Some(Pause {
                unknown: Default::default(),
                by: String::new(),
                reason,
                at: DateTime::<Utc>::UNIX_EPOCH,
            }))
        }
        Err(e) => Err(e.into()),
    }
}

/// The one rule of which pause is in force: a Config's own, else the global one.
pub fn in_force(own: Option<&Pause>, global: Option<&Pause>) -> Option<Pause> {
    own.or(global).cloned()
}

/// The pause in force for `rec` ([`in_force`]; only the global one when there is no record).
/// The global pause is read only when the Config has none of its own.
pub async fn paused(env: &Env, rec: Option<&ConfigRecord>) -> Result<Option<Pause>, TaskError> {
    match rec.and_then(|r| r.paused.as_ref()) {
        Some(own) => Ok(Some(own.clone())),
        None => global(&*env.ports.store).await,
    }
}

/// Whether making or replacing VMs of `rec` is held: [`paused`], or the Config's breaker is open
/// (for any VM but its canary, when `vm_id` names one).
pub async fn held(env: &Env, rec: &ConfigRecord, vm_id: Option<&str>) -> Result<Option<Pause>, TaskError> {
    Ok(held_by(rec, paused(env, Some(rec)).await?.as_ref(), vm_id))
}

/// [`held`] given `paused`, the pause in force for `rec` as the caller read it ([`paused`], once
/// for many VMs): no read.
pub fn held_by(rec: &ConfigRecord, paused: Option<&Pause>, vm_id: Option<&str>) -> Option<Pause> {
    paused.cloned().or_else(|| breaker_hold(rec, vm_id))
}

/// [`held`] for Config `prefix` as stored: only the global pause when it has no record, or one
/// that does not decode (that is reported and repaired by `import_configs`).
pub async fn held_of(env: &Env, prefix: &str) -> Result<Option<Pause>, TaskError> {
    match env.ports.store.config(prefix).await {
        Ok(Some(c)) => held(env, &c.value, None).await,
        Ok(None) | Err(StoreError::Corrupt { .. } | StoreError::Newer { .. }) => paused(env, None).await,
        Err(e) => Err(e.into()),
    }
}

/// Pushes what makes Configs converge after a pause is lifted (or a breaker closed):
/// `expand_config` for `only` (every Config when `None`), `create_instance` for their VMs that
/// wait for an instance, and `manage_bot` for those that have one (a VM kept past its deadline
/// is retired at once).
pub async fn wake(env: &Env, only: Option<&str>) -> Result<(), TaskError> {
    let prefixes: Vec<String> = match only {
        Some(p) => vec![p.to_owned()],
        None => env.ports.store.configs().await?.into_iter().map(|c| c.value.config.prefix).collect(),
    };
    let expand: Vec<ExpandConfig> = prefixes.iter().map(|p| ExpandConfig { prefix: p.clone() }).collect();
    env.push_many(&expand).await?;
    let ids = async |index| -> Result<Vec<String>, TaskError> {
        let all = env.ports.store.vm_ids(index).await?.into_iter();
        Ok(all.filter(|id| only.is_none_or(|p| parse_id(id).is_some_and(|(of, _)| of == p))).collect())
    };
    let waiting: Vec<CreateInstance> =
        ids(VmIndex::Uncreated).await?.into_iter().map(|id| CreateInstance { id }).collect();
    env.push_many(&waiting).await?;
    let made: Vec<ManageBot> = ids(VmIndex::Created).await?.into_iter().map(|id| ManageBot { id }).collect();
    env.push_many(&made).await.map(drop)
}

/// The hold an open breaker puts on `rec` (as a pause by [`BY`]), unless `vm_id` is its canary.
fn breaker_hold(rec: &ConfigRecord, vm_id: Option<&str>) -> Option<Pause> {
    let open = rec.breaker.open.as_ref()?;
    if vm_id.is_some() && open.canary.as_deref() == vm_id {
        return None;
    }
    Some(Pause { unknown: Default::default(), by: BY.into(), reason: open.reason.clone(), at: open.since })
}
