//! A stored Config no file holds: orphaned first (its file may come back), deleted with its VMs
//! drained once the grace has passed; a corrupt record no file holds after the same grace.

use super::sources::{STAGE, file_actor, source_name};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{AuditAction, AuditEntry, ConfigRecord};
use crate::ports::store::{Expect, Versioned, VmIndex};
use crate::work::DrainVm;

/// A stored Config no file holds: orphaned first, deleted (its VMs drained) after the grace.
pub(super) async fn orphan(ctx: &Ctx, cur: &Versioned<ConfigRecord>) -> Result<usize, TaskError> {
    let rec = &cur.value;
    let now = ctx.now();
    if let Some(at) =
        rec.delete_at.or(rec.orphaned.map(|t| t + ctx.settings.timing.config_delete_grace.chrono()))
    {
        if at > now {
            return Ok(0);
        }
        let since = rec.orphaned.unwrap_or(at).format("%Y-%m-%d %H:%M:%S UTC");
        let why = match rec.from_file() {
            true => format!("its file {} has been gone since {since}", rec.source),
            false => format!("it was deleted over the API at {since}"),
        };
        return delete(ctx, cur, &why).await;
    }
    let at = now + ctx.settings.timing.config_delete_grace.chrono();
    let next = ConfigRecord { orphaned: Some(now), delete_at: Some(at), ..rec.clone() };
    if ctx.ports.store.put_config(&next, Expect::Version(cur.version)).await? {
        let prefix = &rec.config.prefix;
        let vms = ctx.ports.store.vm_ids(VmIndex::OfConfig(prefix.clone())).await?.len();
        let at = at.format("%Y-%m-%d %H:%M:%S UTC");
        let msg = format!(
            "Config orphaned: its file {} is gone; the Config and its {vms} VMs will be deleted at {at} unless the file comes back",
            rec.source
        );
        let detail = format!("the file is gone: it and its {vms} VMs go at {at} unless the file comes back");
        let actor = file_actor(&source_name(&rec.source));
        ctx.audit(AuditEntry::on(&next, now, &actor, AuditAction::Delete).detail(detail)).await;
        ctx.record(prefix, STAGE, "orphaned", &msg, &rec.config.attributes.zone, "").await?;
    }
    Ok(0)
}

/// Mark space of corrupt Config records no file holds (their orphan time cannot be written on
/// the record itself).
pub(super) const CORRUPT_ORPHANS: &str = "corrupt-config";

/// A corrupt Config record no file holds: deleted after the same grace as any other.
pub(super) async fn orphan_corrupt(ctx: &Ctx, cur: &Versioned<ConfigRecord>) -> Result<usize, TaskError> {
    let prefix = &cur.value.config.prefix;
    let since = ctx.ports.store.mark(CORRUPT_ORPHANS, prefix, ctx.now()).await?;
    if since + ctx.settings.timing.config_delete_grace.chrono() > ctx.now() {
        return Ok(0);
    }
    ctx.ports.store.unmark(CORRUPT_ORPHANS, prefix).await?;
    delete(ctx, cur, "its record does not decode and no file has held it for the grace").await
}

/// Deletes a Config record and drains its VMs, saying `why` on its status and at WARN.
async fn delete(ctx: &Ctx, cur: &Versioned<ConfigRecord>, why: &str) -> Result<usize, TaskError> {
    let prefix = cur.value.config.prefix.clone();
    if !ctx.ports.store.delete_config(&prefix, cur.version).await? {
        return Ok(0);
    }
    // Its templates outlive it: their project is audited until they are gone.
    let project = &cur.value.config.attributes.project;
    if !cur.value.resources.is_empty() && !project.is_empty() {
        ctx.ports.store.mark(crate::model::marks::TEMPLATE_PROJECTS, project, ctx.now()).await?;
    }
    let ids = ctx.ports.store.vm_ids(VmIndex::OfConfig(prefix.clone())).await.unwrap_or_default();
    let msg = format!("Config deleted: {why}; draining its {} VMs", ids.len());
    let detail = format!("{why}; draining its {} VMs", ids.len());
    let before = Some(cur.value.revision.as_str()).filter(|r| !r.is_empty());
    let entry = AuditEntry::on(&cur.value, ctx.now(), STAGE, AuditAction::Remove).before(before).after(None);
    ctx.audit(entry.detail(detail)).await;
    ctx.record(&prefix, STAGE, "deleted", &msg, &cur.value.config.attributes.zone, "").await?;
    ctx.push_many(&ids.into_iter().map(|id| DrainVm { id }).collect::<Vec<_>>()).await
}
