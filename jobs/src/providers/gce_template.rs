//! Instance templates for the Compute Engine provider: one per Config revision, the pool's
//! resource (seed 000's `createResources` / `removeResources`).
//!
//! * Name: `<prefix>-<short revision>` ([`template_name`]), fixed, so a request sent again is the
//!   same request; labelled ours (deployment, Config, revision), which the leak audit reads.
//! * Made (`ensure`): asked for on the Config record first (`resources`, with the time it was
//!   asked for), then `instanceTemplates.insert` with requestId
//!   `template-<name>-<since>-<attempt>`, its global operation followed between runs; a 409 is
//!   adopted when the template there is ours; DONE marks it ready, and from then on bulk inserts
//!   of that revision name it as their source ([`for_bulk`]). A failure is recorded on the
//!   Config's status and the task fails (retried).
//! * Removed (`remove`): once it is not the Config's revision and no VM of its revision is left
//!   (the caller checked): marked removing in the record first (no bulk names it from then on),
//!   then `instanceTemplates.delete` (`untemplate-<name>-<since>-<attempt>`) followed the same
//!   way; 404 is done; the record forgets it once gone. A failed delete gets a new attempt and
//!   the task fails (retried).

use std::time::Duration;

pub use crate::config::labels::revision_label;

use crate::config::labels;
use crate::env::{Env, request_id};
use crate::error::TaskError;
use crate::model::marks::TEMPLATE_PROJECTS;
use crate::model::{ConfigRecord, PoolResource, Vm};
use crate::ports::compute::{ComputeError, Kind, Operation, Template, TemplateSpec};
use crate::records::writes::update_config;
use crate::work::{Next, PoolResources};

/// The stage its errors are recorded under (the `pool_resources` queue's).
pub const STAGE: &str = "pool_resources";

/// The longest name Compute takes.
const MAX_NAME: usize = 63;
/// Characters of the revision a template's name keeps.
const SHORT: usize = 8;

/// The one rule for a template's name: `<prefix>-<the first 8 of its revision>`, the prefix cut
/// so the name fits Compute's 63 characters (never ending in `-`). A Config prefix is a valid
/// name's start, so the name is a valid name.
pub fn template_name(prefix: &str, revision: &str) -> String {
    let short: String = revision_label(revision).chars().take(SHORT).collect();
    let room = MAX_NAME - short.len() - 1;
    let cut = prefix.get(..room.min(prefix.len())).unwrap_or(prefix).trim_end_matches('-');
    format!("{cut}-{short}")
}

/// The template of `rec`'s revision, named `name`: the instance one of its VMs is made from
/// (its attributes in its first zone; machine and disk types go by name, so zone-free), with
/// the Config's labels and ours (deployment, Config, revision) and no VM's.
pub fn template_spec(rec: &ConfigRecord, name: &str, deployment: &str) -> TemplateSpec {
    let c = &rec.config;
    let zone = c.zone_names().first().map(|z| (*z).to_owned()).unwrap_or_default();
    let vm = Vm {
        config: c.prefix.clone(),
        attributes: c.attributes_in(&zone),
        swarming: c.swarming.clone(),
        revision: rec.revision.clone(),
        ..Vm::default()
    };
    TemplateSpec {
        name: name.to_owned(),
        description: description(rec),
        instance: bulk_instance(&vm, deployment),
    }
}

/// What a bulk of `vm`'s makes, with no batch label yet: `vm`'s instance with no name and no
/// VM label (Compute labels a bulk's instances alike), with its revision's label.
pub fn bulk_instance(vm: &Vm, deployment: &str) -> crate::ports::compute::InstanceSpec {
    let mut instance = super::gce_insert::instance_spec(vm, deployment);
    instance.name.clear();
    instance.labels.remove(labels::VM);
    instance.labels.insert(labels::REVISION.into(), revision_label(&vm.revision));
    instance
}

fn description(rec: &ConfigRecord) -> String {
    format!("gce-backend Config {} revision {}", rec.config.prefix, rec.revision)
}

/// True when template `t` is Config `prefix`'s of `revision` in `deployment`.
fn ours(t: &Template, deployment: &str, prefix: &str, revision: &str) -> bool {
    let label = |k: &str| t.labels.get(k).map(String::as_str);
    label(labels::DEPLOYMENT) == Some(deployment)
        && label(labels::CONFIG) == Some(prefix)
        && label(labels::REVISION) == Some(revision_label(revision).as_str())
}

/// The template a bulk of `vm` and others like it names as its source, if any: its Config's,
/// made for `vm`'s revision, which is still the Config's, and not being removed.
pub async fn for_bulk(ctx: &Env, vm: &Vm) -> Result<Option<TemplateSpec>, TaskError> {
    let Some(cur) = ctx.ports.store.config(&vm.config).await? else { return Ok(None) };
    let rec = &cur.value;
    Ok(match rec.resource(&vm.revision) {
        Some(r) if r.usable() && rec.revision == vm.revision => {
            Some(template_spec(rec, &r.name, &ctx.settings.deployment))
        }
        _ => None,
    })
}

/// Whether `e`, the answer to a bulk of `vm`'s that named template `name`, says Compute has no
/// such template (deleted outside the service). Then it is no longer ready (bulks send the whole
/// instance until it is back), its next insert is a new request, the Config's status says so,
/// and `pool_resources` makes it again.
pub async fn lost(ctx: &Env, vm: &Vm, name: &str, e: &ComputeError) -> Result<bool, TaskError> {
    if e.kind != Kind::NotFound || !e.message.contains(&format!("instanceTemplates/{name}")) {
        return Ok(false);
    }
    let Some(cur) = ctx.ports.store.config(&vm.config).await? else { return Ok(true) };
    if let Some(r) = cur.value.resource(&vm.revision).filter(|r| r.name == name) {
        update(ctx, &vm.config, r, |x| {
            x.ready.is_some() && x.removing.is_none() && {
                x.ready = None;
                x.operation.clear();
                x.attempt += 1;
                true
            }
        })
        .await?;
    }
    let message = format!(
        "instance template {name} is gone (deleted outside the service?): made again; bulk inserts send the whole instance until then"
    );
    tracing::warn!(config = %vm.config, template = %name, "{message}");
    ctx.record_once(&vm.config, STAGE, &e.code, &message).await?;
    ctx.push(&PoolResources { prefix: vm.config.clone() }).await?;
    Ok(true)
}

/// The requestId of `verb` (`template`, `untemplate`) on `r`, in its attempt.
fn rid(verb: &str, r: &PoolResource) -> String {
    request_id(&format!("{verb}-{}-{}-{}", r.name, r.since.timestamp_millis(), r.attempt))
}

/// Applies `change` to Config `prefix`'s resource of `revision` while it is still the one `r`
/// (asked for at the same time, in the same attempt); the resource as written or found.
async fn update(
    ctx: &Env,
    prefix: &str,
    r: &PoolResource,
    change: impl Fn(&mut PoolResource) -> bool,
) -> Result<Option<PoolResource>, TaskError> {
    let written = update_config(ctx, prefix, |rec| {
        Ok::<_, TaskError>(match rec.resource_mut(&r.revision) {
            Some(x) if x.since == r.since && x.attempt == r.attempt => change(x),
            _ => false,
        })
    })
    .await?;
    Ok(written.and_then(|(rec, _)| rec.resource(&r.revision).cloned()))
}

/// When to look again at an operation on `r`.
fn poll(ctx: &Env, r: &PoolResource) -> Next {
    Next::After(ctx.operation_poll(ctx.now() - r.removing.unwrap_or(r.since)))
}

/// One step towards `rec`'s template of its revision being there (see the module).
pub async fn ensure(ctx: &Env, rec: &ConfigRecord) -> Result<Next, TaskError> {
    let (prefix, revision) = (rec.config.prefix.as_str(), rec.revision.as_str());
    if revision.is_empty() || rec.config.is_static() {
        return Ok(Next::Done);
    }
    match rec.resource(revision) {
        Some(r) if r.usable() => return Ok(Next::Done),
        // Its revision is back while its removal runs: that ends first.
        Some(r) if r.removing.is_some() => {
            return Ok(match remove(ctx, prefix, revision).await? {
                Next::Done => Next::After(Duration::from_millis(250)),
                next => next,
            });
        }
        _ => {}
    }
    let now = ctx.now();
    let asked = update_config(ctx, prefix, |c| {
        Ok::<_, TaskError>(
            c.revision == revision && c.resource(revision).is_none() && {
                c.resources.push(PoolResource::new(revision, &template_name(prefix, revision), now));
                true
            },
        )
    })
    .await?;
    let Some((rec, _)) = asked.filter(|(c, _)| c.revision == revision) else { return Ok(Next::Done) };
    let Some(r) = rec.resource(revision).cloned().filter(|r| r.ready.is_none() && r.removing.is_none())
    else {
        return Ok(Next::Done);
    };
    let project = rec.config.attributes.project.as_str();
    if !r.operation.is_empty() {
        // An insert in flight: where is it now? (Compute may have forgotten it: send it again.)
        match ctx.ports.compute.global_operation(project, &r.operation).await? {
            Some(op) if !op.done => return Ok(poll(ctx, &r)),
            Some(op) => return made(ctx, &rec, r, op).await,
            None => {}
        }
    }
    let spec = template_spec(&rec, &r.name, &ctx.settings.deployment);
    match ctx.ports.compute.insert_template(project, &rid("template", &r), &spec).await {
        Ok(op) if op.done => made(ctx, &rec, r, op).await,
        Ok(op) => {
            update(ctx, prefix, &r, |x| {
                x.operation != op.name && x.ready.is_none() && {
                    x.operation = op.name.clone();
                    true
                }
            })
            .await?;
            Ok(poll(ctx, &r))
        }
        Err(e) if e.kind == Kind::AlreadyExists => {
            match ctx.ports.compute.template(project, &r.name).await? {
                Some(t) if ours(&t, &ctx.settings.deployment, prefix, revision) => {
                    ready(ctx, project, prefix, &r).await
                }
                _ => {
                    let message = format!(
                        "instance template {}: the name is taken by a template not of this revision",
                        r.name
                    );
                    ctx.record_once(prefix, STAGE, &e.code, &message).await?;
                    Err(TaskError::Compute(ComputeError { message, ..e }))
                }
            }
        }
        // Held back (rate limit, open breaker): a wait, not a failure.
        Err(e) if e.retry_after.is_some() => Err(e.into()),
        Err(e) => {
            let message = format!("instance template {}: {}", r.name, e.message);
            ctx.record_once(prefix, STAGE, &e.code, &message).await?;
            Err(e.into())
        }
    }
}

/// The insert of `r` is DONE: ready, or a new attempt after recording why not.
async fn made(ctx: &Env, rec: &ConfigRecord, r: PoolResource, op: Operation) -> Result<Next, TaskError> {
    let prefix = rec.config.prefix.as_str();
    let Some(e) = op.error else { return ready(ctx, &rec.config.attributes.project, prefix, &r).await };
    let message = format!("instance template {}: {}", r.name, e.message);
    failed_attempt(ctx, prefix, &r, e.kind, message, e).await
}

/// An operation on `r` ended with `e`: recorded on the Config's status once, and the next try
/// gets a new attempt (the failed operation stays bound to its requestId); the task fails as
/// `kind`, so it is retried.
async fn failed_attempt(
    ctx: &Env,
    prefix: &str,
    r: &PoolResource,
    kind: Kind,
    message: String,
    e: ComputeError,
) -> Result<Next, TaskError> {
    ctx.record_once(prefix, STAGE, &e.code, &message).await?;
    update(ctx, prefix, r, |x| {
        x.attempt += 1;
        x.operation.clear();
        true
    })
    .await?;
    Err(TaskError::Compute(ComputeError { kind, message, ..e }))
}

/// Marks `r` (in `project`) made: bulks of its revision name it from now on.
async fn ready(ctx: &Env, project: &str, prefix: &str, r: &PoolResource) -> Result<Next, TaskError> {
    let now = ctx.now();
    let written = update(ctx, prefix, r, |x| {
        x.ready.is_none() && x.removing.is_none() && {
            x.ready = Some(now);
            x.operation.clear();
            true
        }
    })
    .await?;
    if written.is_some_and(|x| x.ready == Some(now)) {
        tracing::info!(config = %prefix, template = %r.name, revision = %r.revision, "instance template made");
        // Audited for leaks in its project from now on, even once no Config names the project.
        ctx.ports.store.mark(TEMPLATE_PROJECTS, project, now).await?;
    }
    ctx.resolved(prefix, &[STAGE]).await?;
    Ok(Next::Done)
}

/// One step towards Config `prefix`'s template of `revision` being gone (see the module).
pub async fn remove(ctx: &Env, prefix: &str, revision: &str) -> Result<Next, TaskError> {
    let now = ctx.now();
    let marked = update_config(ctx, prefix, |c| {
        let current = c.revision == revision;
        Ok::<_, TaskError>(match c.resource_mut(revision) {
            Some(x) if x.removing.is_none() && !current => {
                x.removing = Some(now);
                x.operation.clear();
                true
            }
            _ => false,
        })
    })
    .await?;
    let Some((rec, _)) = marked else { return Ok(Next::Done) };
    let Some(r) = rec.resource(revision).cloned().filter(|x| x.removing.is_some()) else {
        return Ok(Next::Done);
    };
    let project = rec.config.attributes.project.as_str();
    if !r.operation.is_empty() {
        // A delete in flight: where is it now? (Compute may have forgotten it: send it again.)
        match ctx.ports.compute.global_operation(project, &r.operation).await? {
            Some(op) if !op.done => return Ok(poll(ctx, &r)),
            Some(op) => return removed(ctx, project, prefix, r, op).await,
            None => {}
        }
    }
    match ctx.ports.compute.delete_template(project, &r.name, &rid("untemplate", &r)).await {
        Ok(None) => forget(ctx, prefix, &r).await,
        Ok(Some(op)) if op.done => removed(ctx, project, prefix, r, op).await,
        Ok(Some(op)) => {
            update(ctx, prefix, &r, |x| {
                x.operation != op.name && {
                    x.operation = op.name.clone();
                    true
                }
            })
            .await?;
            Ok(poll(ctx, &r))
        }
        Err(e) if e.retry_after.is_some() => Err(e.into()),
        Err(e) => {
            let message = format!("instance template {}: delete: {}", r.name, e.message);
            ctx.record_once(prefix, STAGE, &e.code, &message).await?;
            Err(e.into())
        }
    }
}

/// The delete of `r` is DONE: forgotten when the template is gone, else a new attempt (retried).
async fn removed(
    ctx: &Env,
    project: &str,
    prefix: &str,
    r: PoolResource,
    op: Operation,
) -> Result<Next, TaskError> {
    let Some(e) = op.error else { return forget(ctx, prefix, &r).await };
    if ctx.ports.compute.template(project, &r.name).await?.is_none() {
        return forget(ctx, prefix, &r).await; // gone anyway
    }
    let message = format!("instance template {}: delete: {}", r.name, e.message);
    failed_attempt(ctx, prefix, &r, Kind::Transient, message, e).await
}

/// Drops `r` from its Config record once its template is gone.
async fn forget(ctx: &Env, prefix: &str, r: &PoolResource) -> Result<Next, TaskError> {
    update_config(ctx, prefix, |c| {
        let before = c.resources.len();
        c.resources.retain(|x| !(x.revision == r.revision && x.removing.is_some()));
        Ok::<_, TaskError>(c.resources.len() != before)
    })
    .await?;
    tracing::info!(config = %prefix, template = %r.name, revision = %r.revision, "instance template removed");
    ctx.resolved(prefix, &[STAGE]).await?;
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
