//! Queue actions over the API, recorded in the audit trail: one dead task put back (against the
//! Config it works for, `work::config_of`, or the global list for a task of no one Config), and
//! every dead task of a queue put back or dropped, or every pending one dropped (the global
//! list: they span Configs). An action that finds nothing to do records nothing.

use gce_backend_queues::{DeadSelection, Queue, TaskStatus};

use crate::ctx::Ctx;
use crate::model::{AuditAction, AuditEntry};
use crate::tasks::QUEUES;

use super::shared::{Actor, OpError, audit_on};

/// The queue `name`, or NotFound naming the queues (the one check of a queue's name).
pub fn queue<'a>(ctx: &'a Ctx, name: &str) -> Result<&'a Queue, OpError> {
    if !QUEUES.contains(&name) {
        return Err(OpError::NotFound(format!("queue {name:?} (queues: {})", QUEUES.join(", "))));
    }
    Ok(ctx.queues.get(name))
}

/// Puts the dead task `t` back; NotFound when it is not dead (any more).
pub async fn retry_task(ctx: &Ctx, t: &TaskStatus, by: Actor<'_>) -> Result<u64, OpError> {
    let n = queue(ctx, &t.queue)?.retry_dead(DeadSelection::One(t.task_id.clone())).await?;
    if n == 0 {
        return Err(OpError::NotFound(format!("dead task {:?} in queue {}", t.task_id, t.queue)));
    }
    let detail = format!("queue {}: task {} (key {})", t.queue, t.task_id, t.key);
    match crate::work::config_of(&t.queue, &t.key) {
        Some(prefix) => audit_on(ctx, &prefix, by, AuditAction::RetryTask, detail).await,
        None => ctx.audit(AuditEntry::global(ctx.now(), by, AuditAction::RetryTask).detail(detail)).await,
    }
    Ok(n)
}

/// Puts every dead task of queue `name` back; returns how many.
pub async fn retry_dead(ctx: &Ctx, name: &str, by: Actor<'_>) -> Result<u64, OpError> {
    let n = queue(ctx, name)?.retry_dead(DeadSelection::All).await?;
    queue_wide(ctx, by, AuditAction::RetryDead, name, n, "dead tasks put back").await;
    Ok(n)
}

/// Drops every dead task of queue `name`; returns how many.
pub async fn purge_dead(ctx: &Ctx, name: &str, by: Actor<'_>) -> Result<u64, OpError> {
    let n = queue(ctx, name)?.purge_dead().await?;
    queue_wide(ctx, by, AuditAction::PurgeDead, name, n, "dead tasks dropped").await;
    Ok(n)
}

/// Drops every pending task of queue `name`; returns how many.
pub async fn purge_pending(ctx: &Ctx, name: &str, by: Actor<'_>) -> Result<u64, OpError> {
    let n = queue(ctx, name)?.purge_pending().await?;
    queue_wide(ctx, by, AuditAction::PurgePending, name, n, "pending tasks dropped").await;
    Ok(n)
}

/// The global entry of a queue-wide action that affected `n` tasks (none when 0).
async fn queue_wide(ctx: &Ctx, by: Actor<'_>, action: AuditAction, name: &str, n: u64, what: &str) {
    if n > 0 {
        let detail = format!("queue {name}: {n} {what}");
        ctx.audit(AuditEntry::global(ctx.now(), by, action).detail(detail)).await;
    }
}

#[cfg(test)]
mod tests;
