//! Bulk creation for the Compute Engine provider: a Config's VMs waiting for an instance go in
//! `instances.bulkInsert`s, each one call against the project's rate quota however many it makes,
//! and what each made is recorded per VM.
//!
//! * Form: the VMs waiting, by (zone, instance attributes, Swarming server), in bulks of at most
//!   `[limits] bulk_max`; a group smaller than `bulk_min` goes one insert per VM, as before.
//! * Source: a bulk of VMs of the Config's current revision names the Config's instance template
//!   (`gce_template.rs`) once it is made, and sends only what differs from it (the batch label);
//!   before that, or for VMs of an older revision, it sends the whole instance. A template
//!   Compute no longer has (deleted outside the service) is made again, and the bulk is sent
//!   again at once with the whole instance.
//! * Claim, then send: each member's record gets `insert_sent` and the bulk's requestId (`batch`)
//!   with a compare-and-set before the call (a few writes at a time). The requestId is derived
//!   from the members' hostnames and attempts, so a bulk sent again (after a crash, a throttle, a
//!   5xx, or an operation Compute forgot) is the same request with the same members, which
//!   Compute answers with the same operation: nothing is made twice.
//! * Follow: the bulk's operation (its name recorded on one member: one write, not one per VM)
//!   is looked at (zoneOperations.get) until DONE; then the instances carrying its batch label
//!   are listed and recorded on their VMs. A member not made gets its next attempt, sent alone
//!   (its own insert reports its own error: a stockout backs the zone off, a name in use is
//!   adopted or given up).
//! * Refused outright (no room anywhere, quota): nothing was made, the zone (or the rank's machine
//!   type in it) backs off and the members go back to waiting, each through `create_instance` (a
//!   multi-zone Config's, or one with ranks, then move to another zone or rank).
//! * Compute runs at most `bulk_running` bulks at once per project: a place is taken before a bulk
//!   is claimed (so its members' wait is not counted as its operation's) and given back once its
//!   operation is DONE (or after 15 minutes, if a process died).

use std::collections::BTreeMap;
use std::time::Duration;

use super::gce_insert::insert_alone;
use super::gce_template::{bulk_instance, for_bulk, lost};
use crate::config::labels;
use crate::env::{Env, request_id};
use crate::error::TaskError;
use crate::fleet::lifecycle::created_in_bulk;
use crate::metrics::Stage;
use crate::model::marks::{BULKS_OPEN, GATHER};
use crate::model::{ConfigRecord, Vm};
use crate::ports::compute::{BulkSpec, ComputeError, Instance, Kind, Operation};
use crate::ports::store::Versioned;
use crate::records::counts;
use crate::work::{CreateInstance, Next};
use crate::{placement::backoff, placement::backoff::Scope};
use crate::{records::writes::each, records::writes::write_vm_at};
use gce_backend_queues::When;

/// The stage its errors are recorded under.
const STAGE: &str = "bulk_insert";

/// How long a bulk holds its place among those running at once, unless given back sooner.
const HOLD: Duration = Duration::from_secs(900);

/// Whether a VM of `cfg` waiting for its first insert goes in a bulk: the Config makes
/// `bulk_min` VMs or more, and more of them are still being made (it has fewer records than it
/// makes) or `bulk_min` or more wait for an instance. A one-off replacement, or a VM of a small
/// pool, goes alone: as cheap, and its error is its own.
pub async fn in_bulk(ctx: &Env, cfg: &ConfigRecord) -> Result<bool, TaskError> {
    let (made, min) = (cfg.vms_made(), ctx.settings.limits.bulk_min);
    if made < min {
        return Ok(false);
    }
    let c = counts::of_config(&*ctx.ports.store, &cfg.config.prefix, 0, ctx.now()).await?;
    Ok(c.vms < made || c.vms.saturating_sub(c.created) >= min)
}

/// How long `bulk_insert` waits for more before it sends, if at all: while `cfg`'s records are
/// still being made and fewer than a full bulk wait, up to `bulk_gather` after its first look
/// (what is left of it).
pub async fn gathering(ctx: &Env, cfg: &ConfigRecord) -> Result<Option<Duration>, TaskError> {
    let (now, prefix) = (ctx.now(), cfg.config.prefix.as_str());
    let c = counts::of_config(&*ctx.ports.store, prefix, 0, now).await?;
    let full = c.vms >= cfg.vms_made() || c.vms.saturating_sub(c.created) >= ctx.settings.limits.bulk_max;
    if !full {
        let first = ctx.ports.store.mark(GATHER, prefix, now).await?;
        let left = (first + ctx.settings.timing.bulk_gather.chrono() - now).to_std().unwrap_or_default();
        if !left.is_zero() {
            return Ok(Some(left));
        }
    }
    ctx.ports.store.unmark(GATHER, prefix).await?;
    Ok(None)
}

/// The name of project `project`'s places for bulks running at once.
fn places(project: &str) -> String {
    format!("{project}/bulk")
}

/// Whether project `project` has a place for one more bulk now (a look: taking one decides).
pub async fn place_free(ctx: &Env, project: &str) -> bool {
    let held = ctx.ports.buckets.holders(&places(project)).await;
    held.map_or(true, |n| n < ctx.settings.limits.bulk_running)
}

/// How soon a bulk that found no place looks again.
pub const PLACE_WAIT: Duration = Duration::from_millis(500);

/// How soon a gathering `bulk_insert` with nothing in flight looks again (a look costs a few
/// reads; one with bulks in flight looks when their operations are due).
pub const GATHER_LOOK: Duration = Duration::from_millis(250);

/// The requestId of a bulk of `members`: from their hostnames and attempts, in name order.
pub fn bulk_request_id(members: &[&Vm]) -> String {
    let mut names: Vec<String> =
        members.iter().map(|v| format!("{}:{}", v.hostname, v.insert_attempt)).collect();
    names.sort();
    request_id(&format!("bulk-{}", names.join(",")))
}

/// The groups of `waiting` that go in one bulk each, in order: same zone, attributes and
/// Swarming server, at most `max` per bulk. (Compute makes a bulk's instances alike.)
pub fn groups(waiting: Vec<Versioned<Vm>>, max: usize) -> Vec<Vec<Versioned<Vm>>> {
    let mut by: BTreeMap<(String, String, String, String), Vec<Versioned<Vm>>> = BTreeMap::new();
    for cur in waiting {
        let v = &cur.value;
        let attributes = serde_json::to_string(&v.attributes).unwrap_or_default();
        by.entry((v.project().to_owned(), v.zone().to_owned(), attributes, v.swarming.clone()))
            .or_default()
            .push(cur);
    }
    let mut out = Vec::new();
    for (_, mut group) in by {
        group.sort_by_key(|c| c.value.index);
        let mut rest = group.as_slice();
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(rest.len().min(max.max(1)));
            out.push(chunk.to_vec());
            rest = tail;
        }
    }
    out
}

/// One step of a Config's bulk creation: `open` are its bulks sent or claimed (members by bulk),
/// `waiting` its VMs that may be sent now (checked by the caller).
pub async fn step(
    ctx: &Env,
    open: Vec<Vec<Versioned<Vm>>>,
    waiting: Vec<Versioned<Vm>>,
) -> Result<Next, TaskError> {
    let mut next = Next::Done;
    for members in open {
        next = next.sooner(follow(ctx, members).await?);
    }
    let (min, max) = (ctx.settings.limits.bulk_min as usize, ctx.settings.limits.bulk_max as usize);
    for group in groups(waiting, max) {
        // Backed off (quota, stockout): each VM's create_instance waits, or moves it.
        if backoff::wait_for(ctx, &group[0].value).await?.is_some() {
            let alone: Vec<CreateInstance> =
                group.iter().map(|c| CreateInstance { id: c.value.id.clone() }).collect();
            ctx.push_many(&alone).await?;
            continue;
        }
        if group.len() < min {
            for cur in group {
                let id = cur.value.id.clone();
                let step = insert_alone(ctx, cur).await?;
                if let Next::After(d) = step {
                    ctx.push_at(&CreateInstance { id }, When::After(d)).await?;
                }
            }
            continue;
        }
        let refs: Vec<&Vm> = group.iter().map(|c| &c.value).collect();
        let rid = bulk_request_id(&refs);
        // A place first: members are claimed (and their time counted) only when it can go now.
        let place = places(group[0].value.project());
        if !ctx
            .ports
            .buckets
            .enter(&place, &rid, ctx.settings.limits.bulk_running, HOLD)
            .await
            .unwrap_or(true)
        {
            next = next.sooner(Next::After(PLACE_WAIT));
            continue;
        }
        let claimed = claim(ctx, group, &rid).await?;
        if claimed.is_empty() {
            let _ = ctx.ports.buckets.leave(&place, &rid).await;
        }
        if !claimed.is_empty() {
            next = next.sooner(send(ctx, claimed, &rid).await?);
        }
    }
    Ok(next)
}

/// Marks each member sent in bulk `rid` (compare-and-set: one another run took is left out),
/// a few at a time.
async fn claim(ctx: &Env, group: Vec<Versioned<Vm>>, rid: &str) -> Result<Vec<Versioned<Vm>>, TaskError> {
    let now = ctx.now();
    let claimed = each(group, |cur| async move {
        let hostname = cur.value.hostname.clone();
        let written = write_vm_at(ctx, cur, |v| {
            v.hostname == hostname
                && v.instance.is_none()
                && v.insert_sent.is_none()
                && v.batch.is_empty()
                && {
                    v.insert_sent = Some(now);
                    v.batch = rid.to_owned();
                    true
                }
        })
        .await?;
        Ok(written.filter(|(_, took)| *took).map(|(cur, _)| cur))
    })
    .await?;
    Ok(claimed.into_iter().flatten().collect())
}

/// Sends bulk `rid` of `members` (all claimed by it): the same request each time.
async fn send(ctx: &Env, members: Vec<Versioned<Vm>>, rid: &str) -> Result<Next, TaskError> {
    let first = members[0].value.clone();
    let (project, zone) = (first.project().to_owned(), first.zone().to_owned());
    let place = places(&project);
    if !ctx.ports.buckets.enter(&place, rid, ctx.settings.limits.bulk_running, HOLD).await.unwrap_or(true) {
        return Ok(Next::After(PLACE_WAIT));
    }
    let mut instance = bulk_instance(&first, &ctx.settings.deployment);
    instance.labels.insert(labels::BATCH.into(), rid.to_owned());
    let names = members.iter().map(|c| c.value.hostname.clone()).collect();
    // The Config's template of this revision, once made: the bulk names it; until then (or
    // for VMs of an older revision) it sends the whole instance.
    let template = for_bulk(ctx, &first).await?;
    let named = template.as_ref().map(|t| t.name.clone());
    let spec = BulkSpec { instance, names, template };
    let op = match ctx.ports.compute.bulk_insert(&project, &zone, rid, &spec).await {
        Ok(op) => op,
        Err(e) => {
            let _ = ctx.ports.buckets.leave(&place, rid).await;
            if let Some(name) = named
                && lost(ctx, &first, &name, &e).await?
            {
                // Sent again soon, the same members and requestId (Compute made nothing and
                // kept no operation for it), with the whole instance.
                return Ok(Next::After(Duration::from_millis(250)));
            }
            return refused(ctx, members, rid, e).await;
        }
    };
    ctx.ports.store.mark(BULKS_OPEN, &first.config, ctx.now()).await?;
    // Counted once per VM: on the bulk's first sending, not when it is sent again.
    let now = ctx.now();
    if members.iter().all(|c| c.value.operation.is_empty()) {
        for vm in members.iter().map(|c| &c.value).filter(|v| v.insert_attempt == 0) {
            ctx.metrics.lifecycle(vm, Stage::ChangeToInsert, vm.configured, now);
        }
    }
    let recorded = note_operation(ctx, members, rid, &op.name).await?;
    tracing::info!(config = %first.config, zone = %zone, vms = recorded.len(), operation = %op.name, "bulk insert sent");
    match recorded.is_empty() {
        true => Ok(Next::Done),
        false => done_or_later(ctx, recorded, rid, op).await,
    }
}

/// Records operation `op` of bulk `rid` on one member still in it (the first that takes the
/// write; the requestId is on every member, and `follow` looks for the operation on any), and
/// returns the members (one that moved on to another incarnation or bulk left out).
async fn note_operation(
    ctx: &Env,
    members: Vec<Versioned<Vm>>,
    rid: &str,
    op: &str,
) -> Result<Vec<Versioned<Vm>>, TaskError> {
    if members.iter().any(|c| c.value.operation == op) {
        return Ok(members);
    }
    let mut out = Vec::with_capacity(members.len());
    let mut rest = members.into_iter();
    for cur in rest.by_ref() {
        let written = write_vm_at(ctx, cur, |v| {
            v.batch == rid && v.instance.is_none() && {
                v.operation = op.to_owned();
                true
            }
        })
        .await?;
        if let Some((cur, _)) = written.filter(|(c, _)| c.value.batch == rid && c.value.operation == op) {
            out.push(cur);
            break;
        }
    }
    out.extend(rest);
    Ok(out)
}

/// Follows bulk `members[0].batch`: sends it again when not known to be sent (or forgotten by
/// Compute), else looks at its operation.
async fn follow(ctx: &Env, members: Vec<Versioned<Vm>>) -> Result<Next, TaskError> {
    let first = &members[0].value;
    let rid = first.batch.clone();
    let Some(name) = members.iter().map(|c| c.value.operation.clone()).find(|o| !o.is_empty()) else {
        return send(ctx, members, &rid).await;
    };
    match ctx.ports.compute.operation(first.project(), first.zone(), &name).await {
        Ok(Some(op)) => done_or_later(ctx, members, &rid, op).await,
        Ok(None) => send(ctx, members, &rid).await,
        // Held back (rate limit, open breaker): look again when the way is open.
        Err(ComputeError { retry_after: Some(wait), .. }) => Ok(Next::After(wait)),
        Err(e) => Err(e.into()),
    }
}

/// A bulk's operation as read: looked at again while it runs; once DONE, each member made is
/// recorded and each other one is sent again alone.
async fn done_or_later(
    ctx: &Env,
    members: Vec<Versioned<Vm>>,
    rid: &str,
    op: Operation,
) -> Result<Next, TaskError> {
    let first = members[0].value.clone();
    if !op.done {
        let sent = first.insert_sent.unwrap_or_else(|| ctx.now());
        return Ok(Next::After(ctx.operation_poll(ctx.now() - sent)));
    }
    let _ = ctx.ports.buckets.leave(&places(first.project()), rid).await;
    let made = match listed(ctx, &first, rid).await {
        Ok(made) => made,
        Err(ComputeError { retry_after: Some(wait), .. }) => return Ok(Next::After(wait)),
        Err(e) => return Err(e.into()),
    };
    let (mut found, mut missing) = (Vec::new(), Vec::new());
    for cur in members {
        match made.get(&cur.value.hostname).filter(|i| i.belongs_to(&cur.value.id, &ctx.settings.deployment))
        {
            Some(inst) => found.push((cur, inst.placed())),
            None => missing.push(cur),
        }
    }
    created_in_bulk(ctx, found).await?;
    if missing.is_empty() {
        return Ok(Next::Done);
    }
    let why = op.error.clone().unwrap_or_else(|| ComputeError {
        kind: Kind::Transient,
        code: "NOT_MADE".into(),
        message: String::new(),
        retry_after: None,
    });
    let message = format!(
        "bulk insert {}: {} of its VMs not made ({}){}",
        op.name,
        missing.len(),
        missing.iter().map(|c| c.value.hostname.as_str()).take(3).collect::<Vec<_>>().join(", "),
        if why.message.is_empty() { String::new() } else { format!(": {}", why.message) }
    );
    ctx.metrics.instance_op(&first, "bulk_insert", why.kind.as_str(), &why.code);
    ctx.record_vm(&missing[0].value, STAGE, &why.code, &message, &op.name).await?;
    if matches!(why.kind, Kind::Quota | Kind::Stockout) {
        crate::placement::spot::refused(ctx, &missing[0].value, &why.code, &op.name).await?;
        backoff::hit(ctx, &Scope::refused(&first), &why.code).await?;
    }
    // The bulk's requestId stays bound to its operation: each goes again alone, a new attempt.
    release(ctx, missing, rid, true).await
}

/// The instances bulk `rid` made in `vm`'s project and zone, by name (every page).
async fn listed(ctx: &Env, vm: &Vm, rid: &str) -> Result<BTreeMap<String, Instance>, ComputeError> {
    let filter = format!(
        "(labels.{} = \"{}\") (labels.{} = \"{rid}\")",
        labels::DEPLOYMENT,
        ctx.settings.deployment,
        labels::BATCH
    );
    let mut out = BTreeMap::new();
    let mut page = None;
    loop {
        let (instances, next) = ctx.ports.compute.list(vm.project(), vm.zone(), &filter, page).await?;
        out.extend(instances.into_iter().map(|i| (i.name.clone(), i)));
        match next {
            Some(p) => page = Some(p),
            None => return Ok(out),
        }
    }
}

/// A bulk Compute did not take.
async fn refused(
    ctx: &Env,
    members: Vec<Versioned<Vm>>,
    rid: &str,
    e: ComputeError,
) -> Result<Next, TaskError> {
    match (e.kind, e.retry_after) {
        // Held back (rate limit, open breaker): sent again, the same, when the way is open.
        (_, Some(wait)) => return Ok(Next::After(wait)),
        // Sent again, the same, after the queue's backoff.
        (Kind::RateLimited | Kind::Transient | Kind::Throttled, None) => return Err(e.into()),
        _ => {}
    }
    let first = members[0].value.clone();
    ctx.metrics.instance_op(&first, "bulk_insert", e.kind.as_str(), &e.code);
    let message = format!("bulk insert of {} VMs refused: {}", members.len(), e.message);
    ctx.record_vm(&first, STAGE, &e.code, &message, "").await?;
    let capacity = matches!(e.kind, Kind::Quota | Kind::Stockout);
    if capacity {
        crate::placement::spot::refused(ctx, &first, &e.code, "").await?;
        backoff::hit(ctx, &Scope::refused(&first), &e.code).await?;
    }
    // No operation holds the requestId: a refusal for want of room leaves the attempt as it is
    // (sent again in bulk when the zone's backoff ends); any other goes again alone, a new
    // attempt, so each VM's own insert says what is wrong with it.
    release(ctx, members, rid, !capacity).await
}

/// Gives `members` of bulk `rid` back to waiting (not sent, in no bulk), each on its next attempt
/// when `next_attempt`, and hands them to `create_instance` (a compare-and-set each: a member
/// that moved on since is left alone).
async fn release(
    ctx: &Env,
    members: Vec<Versioned<Vm>>,
    rid: &str,
    next_attempt: bool,
) -> Result<Next, TaskError> {
    let again = each(members, |cur| async move {
        let (id, hostname, attempt) =
            (cur.value.id.clone(), cur.value.hostname.clone(), cur.value.insert_attempt);
        let written = write_vm_at(ctx, cur, |v| {
            v.hostname == hostname
                && v.insert_attempt == attempt
                && v.batch == rid
                && v.instance.is_none()
                && {
                    v.insert_attempt += u32::from(next_attempt);
                    v.insert_sent = None;
                    v.batch.clear();
                    v.operation.clear();
                    true
                }
        })
        .await?;
        Ok(matches!(written, Some((_, true))).then_some(CreateInstance { id }))
    })
    .await?;
    let again: Vec<CreateInstance> = again.into_iter().flatten().collect();
    ctx.push_many(&again).await?;
    Ok(Next::Done)
}

#[cfg(test)]
mod tests;
