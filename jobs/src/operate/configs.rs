//! Configs over the API: apply and delete the ones the API owns (source
//! [`API_SOURCE`]), set any Config's amount, pause and resume one Config or all of them. Each
//! change made goes into the audit trail here, once made (a refused or failed operation, or one
//! that changes nothing, records nothing).

use crate::config::Config;
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{API_SOURCE, AuditAction, AuditEntry, ConfigRecord, Pause};
use crate::ports::store::{Expect, Fence, StoreError, VmIndex};
use crate::work::ExpandConfig;

use super::shared::{Actor, OpError, STAGE, admit, update_config};
use crate::records::writes::CAS_TRIES;
use crate::safety::pause::wake;

/// The revision of a Config made over the API: the hash of its JSON, as a file's is of its text.
fn revision_of(config: &Config) -> String {
    let json = serde_json::to_string(config).unwrap_or_default();
    format!("{:016x}", crate::config::fnv(json.as_bytes(), crate::config::FNV_START))
}

/// The record applying `config` over the API writes in place of `cur` (`None`: a new Config):
/// its amount kept within the new bounds, and what a Config keeps across revisions (a rolling
/// update starting, a provider change, a static pool's slots: [`ConfigRecord::succeed`]).
pub(super) fn successor(
    ctx: &Ctx,
    config: &Config,
    cur: Option<&ConfigRecord>,
    verified: bool,
) -> ConfigRecord {
    let now = ctx.now();
    let mut rec = ConfigRecord {
        current_amount: config.amount.at(cur.map_or(0, |c| c.current_amount), now),
        config: config.clone(),
        revision: revision_of(config),
        source: API_SOURCE.to_owned(),
        orphaned: None,
        delete_at: None,
        verified,
        ..Default::default()
    };
    rec.succeed(cur, ctx.providers.declared(), now);
    rec
}

/// Creates or replaces a Config that the API owns (source "api"). Same validation as files
/// (Config::problems + check_limits + the project's zones and disk types + the across-Configs
/// prefix rule against every stored Config); a prefix held by a file is a Conflict ("prefix linux
/// belongs to file linux.yaml; the API may change its amount and pause state only"). Keeps
/// current_amount (clamped by the new bounds) and paused of an existing record; applying a
/// Config deleted over the API (still in its grace) cancels the deletion. Pushes expand_config
/// so it converges at once. Returns the stored record and whether it was new.
pub async fn apply(ctx: &Ctx, config: Config, by: Actor<'_>) -> Result<(ConfigRecord, bool), OpError> {
    apply_expecting(ctx, config, by, Must::Any).await
}

/// What [`apply_expecting`] must find, so that two callers never overwrite each other unseen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Must {
    /// No Config of that prefix (a creation).
    Absent,
    /// The record at this version (a replacement of what the caller read).
    Version(u64),
    /// Whatever is there.
    Any,
}

/// [`apply`], refused with a Conflict when the stored record is not what `must` says.
pub async fn apply_expecting(
    ctx: &Ctx,
    config: Config,
    by: Actor<'_>,
    must: Must,
) -> Result<(ConfigRecord, bool), OpError> {
    ctx.admitting(async |fence| admit_and_write(ctx, config, by, must, fence).await).await
}

async fn admit_and_write(
    ctx: &Ctx,
    mut config: Config,
    by: Actor<'_>,
    must: Must,
    fence: &Fence,
) -> Result<(ConfigRecord, bool), OpError> {
    let prefix = config.prefix.clone();
    for _ in 0..CAS_TRIES {
        let cur = ctx.ports.store.config(&prefix).await?;
        match (must, &cur) {
            (Must::Absent, Some(_)) => {
                return Err(OpError::Conflict(format!(
                    "Config {prefix:?} exists: change it with updateConfig"
                )));
            }
            (Must::Version(v), c) if c.as_ref().map(|c| c.version) != Some(v) => {
                return Err(OpError::Conflict(format!(
                    "Config {prefix:?} changed since it was read: read it again"
                )));
            }
            _ => {}
        }
        let verified = admit(ctx, &mut config, cur.as_ref().map(|c| &c.value)).await?.into_result()?;
        let rec = successor(ctx, &config, cur.as_ref().map(|c| &c.value), verified);
        let written = match &cur {
            Some(c) if c.value == rec => true, // as asked already: nothing to write
            _ => {
                let expect = cur.as_ref().map_or(Expect::Absent, |c| Expect::Version(c.version));
                ctx.ports.store.put_config_fenced(&rec, expect, fence).await?
            }
        };
        if !written {
            // The record changed under us (read again), or the lease lapsed (the fence holds
            // for every try: say so at once).
            if !ctx.ports.store.renew(&fence.key, &fence.holder, crate::env::ADMISSION_LEASE).await? {
                return Err(OpError::Conflict(
                    "the admission lease lapsed (the store was slow): try again".into(),
                ));
            }
            continue;
        }
        let done = match &cur {
            None => {
                tracing::info!(config = %prefix, by = %by, amount = rec.current_amount, "Config created over the API");
                Some((AuditAction::Create, ""))
            }
            Some(c) if c.value.orphaned.is_some() => {
                tracing::warn!(config = %prefix, by = %by, "Config applied again over the API: deletion cancelled");
                Some((AuditAction::Update, "applied again while deleted: deletion cancelled"))
            }
            Some(c) if c.value != rec => {
                tracing::info!(config = %prefix, by = %by, revision = %rec.revision, "Config replaced over the API");
                Some((AuditAction::Update, ""))
            }
            Some(_) => None,
        };
        if let Some((action, detail)) = done {
            let before = cur.as_ref().map(|c| c.value.revision.as_str());
            ctx.audit(AuditEntry::on(&rec, ctx.now(), by, action).before(before).detail(detail)).await;
        }
        ctx.resolved(&prefix, &[STAGE]).await?;
        ctx.push(&ExpandConfig { prefix }).await?;
        return Ok((rec, cur.is_none()));
    }
    Err(TaskError::Conflict(format!("cfg {prefix}")).into())
}

/// Deletes an API-owned Config the way a removed file goes: orphaned now, deleted and drained
/// after timing.config_delete_grace by `import_configs` (applying it again within the grace
/// cancels). A file-owned Config is a Conflict (remove its file instead). Returns the record
/// (with delete_at); deleting it again changes nothing.
pub async fn delete(ctx: &Ctx, prefix: &str, by: Actor<'_>) -> Result<ConfigRecord, OpError> {
    let grace = ctx.settings.timing.config_delete_grace.chrono();
    let (rec, changed) = update_config(ctx, prefix, |rec, now| {
        if rec.from_file() {
            let why = format!("prefix {prefix} belongs to file {}; remove its file instead", rec.source);
            return Err(OpError::Conflict(why));
        }
        if rec.orphaned.is_some() {
            return Ok(false);
        }
        (rec.orphaned, rec.delete_at) = (Some(now), Some(now + grace));
        Ok(true)
    })
    .await?;
    if changed {
        let vms = ctx.ports.store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await.map_or(0, |v| v.len());
        let at = rec.delete_at.unwrap_or_default().format("%Y-%m-%d %H:%M:%S UTC");
        let msg = format!(
            "Config deleted over the API by {by}; it and its {vms} VMs will be deleted at {at} unless it is applied again"
        );
        let detail = format!("it and its {vms} VMs go at {at} unless it is applied again");
        ctx.audit(AuditEntry::on(&rec, ctx.now(), by, AuditAction::Delete).detail(detail)).await;
        ctx.record(prefix, STAGE, "orphaned", &msg, &rec.config.attributes.zone, "").await?;
    }
    Ok(rec)
}

/// LUCI's Configuration.Update of current_amount: sets the amount, clamped by the Config's
/// amount rules at ctx.now() (Amount::at), for any source; pushes expand_config. The value
/// survives re-imports of the same file; a re-import that changes the amount bounds (min/max or
/// windows) restarts it from the new bounds (`import_configs` decides this).
pub async fn set_amount(
    ctx: &Ctx,
    prefix: &str,
    amount: u32,
    by: Actor<'_>,
) -> Result<ConfigRecord, OpError> {
    // The amount it replaced (the closure may run again after a lost race).
    let mut was = 0;
    let (rec, changed) = update_config(ctx, prefix, |rec, now| {
        if rec.config.is_static() {
            return Err(crate::operate::managed_by_list(prefix, "amount"));
        }
        if rec.config.demand.is_some() {
            return Err(super::shared::follows_demand(prefix));
        }
        let clamped = rec.config.amount.at(amount, now);
        let changed = clamped != rec.current_amount;
        was = rec.current_amount;
        rec.current_amount = clamped;
        Ok(changed)
    })
    .await?;
    if changed {
        tracing::info!(config = %prefix, by = %by, asked = amount, amount = rec.current_amount, "amount set over the API");
        let mut detail = format!("amount {was} → {}", rec.current_amount);
        if rec.current_amount != amount {
            detail.push_str(&format!(" (asked {amount}, clamped to its bounds)"));
        }
        ctx.audit(AuditEntry::on(&rec, ctx.now(), by, AuditAction::Amount).detail(detail)).await;
    }
    ctx.push(&ExpandConfig { prefix: prefix.to_owned() }).await?;
    Ok(rec)
}

/// Pauses one Config (any source): creation and replacement stop; draining, deletion, bot
/// cleanup and audit go on (the rule is `Ctx::paused`'s). A paused Config keeps its first pause.
pub async fn pause(ctx: &Ctx, prefix: &str, reason: &str, by: Actor<'_>) -> Result<ConfigRecord, OpError> {
    let (rec, changed) = update_config(ctx, prefix, |rec, at| {
        let fresh = rec.paused.is_none();
        if fresh {
            rec.paused =
                Some(Pause { unknown: Default::default(), by: by.to_owned(), reason: reason.to_owned(), at });
        }
        Ok(fresh)
    })
    .await?;
    if changed {
        tracing::warn!(config = %prefix, by = %by, reason = %reason, "Config paused: no VM is created or replaced until it is resumed");
        ctx.audit(AuditEntry::on(&rec, ctx.now(), by, AuditAction::Pause).detail(reason)).await;
    }
    Ok(rec)
}

/// Lifts the pause of one Config and pushes what makes it converge (expand_config, and
/// create_instance for its VMs waiting for an instance); the global pause, if set, still holds.
pub async fn resume(ctx: &Ctx, prefix: &str, by: Actor<'_>) -> Result<ConfigRecord, OpError> {
    // The pause it lifted (the closure may run again after a lost race).
    let mut lifted = None;
    let (rec, changed) = update_config(ctx, prefix, |rec, _| {
        lifted = rec.paused.take();
        Ok(lifted.is_some())
    })
    .await?;
    if changed {
        tracing::warn!(config = %prefix, by = %by, "Config resumed");
        let detail =
            lifted.map(|p| format!("paused by {} since {}", p.by, p.at.format("%Y-%m-%d %H:%M:%S UTC")));
        ctx.audit(
            AuditEntry::on(&rec, ctx.now(), by, AuditAction::Resume).detail(detail.unwrap_or_default()),
        )
        .await;
    }
    wake(ctx, Some(prefix)).await?;
    Ok(rec)
}

/// The global pause (every Config), kept in the Store; returns the pause in force (the first
/// one when already paused; a record that does not decode is replaced).
pub async fn pause_all(ctx: &Ctx, reason: &str, by: Actor<'_>) -> Result<Pause, OpError> {
    match ctx.ports.store.global_pause().await {
        Ok(Some(p)) => return Ok(p),
        Ok(None) | Err(StoreError::Corrupt { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let p =
        Pause { unknown: Default::default(), by: by.to_owned(), reason: reason.to_owned(), at: ctx.now() };
    ctx.ports.store.set_global_pause(Some(&p)).await?;
    tracing::warn!(by = %by, reason = %reason, "every Config paused: no VM is created or replaced until resumed");
    ctx.audit(AuditEntry::global(p.at, by, AuditAction::PauseAll).detail(reason)).await;
    Ok(p)
}

/// Lifts the global pause and pushes what makes every Config converge (a Config paused on its
/// own stays paused).
pub async fn resume_all(ctx: &Ctx, by: Actor<'_>) -> Result<(), OpError> {
    if crate::safety::pause::global(&*ctx.ports.store).await?.is_some() {
        ctx.ports.store.set_global_pause(None).await?;
        tracing::warn!(by = %by, "global pause lifted");
        ctx.audit(AuditEntry::global(ctx.now(), by, AuditAction::ResumeAll)).await;
    }
    wake(ctx, None).await.map_err(OpError::from)
}

/// The global pause, if set (a record that does not decode reads as a pause saying so).
pub async fn paused_all(ctx: &Ctx) -> Result<Option<Pause>, OpError> {
    Ok(crate::safety::pause::global(&*ctx.ports.store).await?)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod audit_tests;
