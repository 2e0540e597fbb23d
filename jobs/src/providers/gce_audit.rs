//! The Compute Engine provider's audit of its per-pool resources: leaked instance templates in
//! one project, templates carrying our deployment label that no Config record names and whose
//! Config has no VM of their revision. A leak is marked when first seen and deleted (requestId
//! `plug-template-<name>`) only if still leaked `leak_grace` later, as `audit_instances` does
//! for instances. Templates without our label are never touched. A project where a template was
//! made is audited until none of ours is left there, even once no Config names it (the templates
//! of a deleted Config go too).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::config::labels::{self, revision_label};
use crate::env::{Env, request_id};
use crate::error::TaskError;
use crate::model::marks::{TEMPLATE_LEAKS, TEMPLATE_PROJECTS};
use crate::ports::compute::{ComputeError, Kind, Template};
use crate::records::writes::revisions_of;
use crate::work::Next;

/// One audit of `project`'s instance templates.
pub(super) async fn audit(ctx: &Env, project: &str) -> Result<Next, TaskError> {
    let configs = ctx.ports.store.configs().await?;
    let named_project = configs.iter().any(|c| c.value.config.attributes.project == project);
    let ours = match listed(ctx, project).await {
        Ok(ours) => ours,
        // A project gone, or no longer ours to read, that no Config names: not audited again.
        Err(e) if !named_project && matches!(e.kind, Kind::NotFound | Kind::Invalid) => {
            tracing::warn!(%project, error = %e, "cannot list instance templates of a project no Config names: not audited again");
            ctx.ports.store.unmark(TEMPLATE_PROJECTS, project).await?;
            return Ok(Next::Done);
        }
        Err(e) => return Err(e.into()),
    };
    // A project no Config names any more, with no template of ours left: not audited again.
    if ours.is_empty() && !named_project {
        ctx.ports.store.unmark(TEMPLATE_PROJECTS, project).await?;
    }
    // Every template a Config record names, in any state (one being made is named before it is
    // asked for, one being removed until it is gone).
    let named: HashSet<String> =
        configs.into_iter().flat_map(|c| c.value.resources.into_iter().map(|r| r.name)).collect();
    let scope = format!("{project}/");
    let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut leaked = HashSet::new();
    for tpl in ours {
        if named.contains(&tpl.name) {
            continue;
        }
        let prefix = tpl.labels.get(labels::CONFIG).cloned().unwrap_or_default();
        let revision = tpl.labels.get(labels::REVISION).cloned().unwrap_or_default();
        if !used.contains_key(&prefix) {
            let of = if prefix.is_empty() { BTreeSet::new() } else { revisions_of(ctx, &prefix).await? };
            used.insert(prefix.clone(), of.iter().map(|r| revision_label(r)).collect());
        }
        if used.get(&prefix).is_some_and(|r| r.contains(&revision)) {
            continue;
        }
        let key = format!("{scope}{}", tpl.name);
        let now = ctx.now();
        let first = ctx.ports.store.mark(TEMPLATE_LEAKS, &key, now).await?;
        if first == now {
            ctx.metrics.cleanup("leaked_template", "found");
        }
        if first + ctx.settings.timing.leak_grace.chrono() <= now {
            let rid = request_id(&format!("plug-template-{}", tpl.name));
            match ctx.ports.compute.delete_template(project, &tpl.name, &rid).await {
                Ok(_) => {
                    ctx.metrics.cleanup("leaked_template", "deleted");
                    tracing::info!(%project, template = %tpl.name, "deleted a leaked instance template");
                }
                // Held back (rate limit, open breaker): the audit waits for the way to open.
                Err(e) if e.retry_after.is_some() => return Err(e.into()),
                // One template that cannot be deleted (in use by a group, permissions) must not
                // stop the audit.
                Err(e) => {
                    tracing::warn!(%project, template = %tpl.name, error = %e, "cannot delete a leaked instance template")
                }
            }
        }
        leaked.insert(key);
    }
    // Forget candidates that are no longer leaked (named again, or gone).
    for (key, _) in ctx.ports.store.marks(TEMPLATE_LEAKS).await? {
        if key.starts_with(&scope) && !leaked.contains(&key) {
            ctx.ports.store.unmark(TEMPLATE_LEAKS, &key).await?;
        }
    }
    Ok(Next::Done)
}

/// The templates of `project` with our deployment label (every page; the labels checked here
/// too, as not every server filters).
async fn listed(ctx: &Env, project: &str) -> Result<Vec<Template>, ComputeError> {
    let filter = format!("properties.labels.{} = \"{}\"", labels::DEPLOYMENT, ctx.settings.deployment);
    let mut out = Vec::new();
    let mut page = None;
    loop {
        let (templates, next) = ctx.ports.compute.templates(project, &filter, page).await?;
        out.extend(templates.into_iter().filter(|t| {
            t.labels.get(labels::DEPLOYMENT).map(String::as_str) == Some(ctx.settings.deployment.as_str())
        }));
        match next {
            Some(p) => page = Some(p),
            None => return Ok(out),
        }
    }
}
