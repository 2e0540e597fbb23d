//! Queue methods (seed 003 terms): every queue's counts, pending and dead tasks (paged), one
//! task's status, retry and purge.

use axum::extract::{Path, State};
use gce_backend_jobs::tasks::QUEUES;
use gce_backend_queues::{DeadSelection, Queue, TaskStatus};

use super::error::ApiError;
use super::types::{Affected, Page, QueueEntry, QueueList, TaskList};
use super::{Api, Out, Params, ok};

fn queue<'a>(api: &'a Api, name: &str) -> Result<&'a Queue, ApiError> {
    if !QUEUES.contains(&name) {
        return Err(ApiError::not_found(&format!("queue {name:?} (queues: {})", QUEUES.join(", "))));
    }
    Ok(api.ctx.queues.get(name))
}

/// The offset a continuation token stands for (tokens are offsets into the list).
fn offset(page: &Page) -> Result<usize, ApiError> {
    match &page.continuation_token {
        None => Ok(0),
        Some(t) => t
            .parse()
            .map_err(|_| ApiError::invalid(format!("continuationToken {t:?} is not one this API gave"))),
    }
}

fn paged(mut tasks: Vec<TaskStatus>, offset: usize, limit: usize) -> TaskList {
    let more = tasks.len() > limit;
    tasks.truncate(limit);
    let continuation_token = more.then(|| (offset + limit).to_string());
    TaskList { tasks, continuation_token }
}

/// `listQueues`.
pub(super) async fn list(State(api): State<Api>) -> Out<QueueList> {
    let mut queues = Vec::with_capacity(QUEUES.len());
    for name in QUEUES {
        queues
            .push(QueueEntry { name: (*name).to_owned(), counts: api.ctx.queues.get(name).counts().await? });
    }
    ok(QueueList { queues })
}

/// `pendingTasks`: pending first, then delayed.
pub(super) async fn pending(
    State(api): State<Api>,
    Path(name): Path<String>,
    Params(page): Params<Page>,
) -> Out<TaskList> {
    let q = queue(&api, &name)?;
    let (offset, limit) = (offset(&page)?, page.limit()?);
    let mut tasks = q.pending(limit + 1, offset).await?;
    if tasks.len() <= limit {
        let pending = q.counts().await?.pending as usize;
        let skip = offset.saturating_sub(pending);
        tasks.extend(q.delayed(limit + 1 - tasks.len(), skip).await?);
    }
    ok(paged(tasks, offset, limit))
}

/// `deadTasks`.
pub(super) async fn dead(
    State(api): State<Api>,
    Path(name): Path<String>,
    Params(page): Params<Page>,
) -> Out<TaskList> {
    let q = queue(&api, &name)?;
    let (offset, limit) = (offset(&page)?, page.limit()?);
    let tasks: Vec<_> = q.dead(offset + limit + 1).await?.into_iter().skip(offset).collect();
    ok(paged(tasks, offset, limit))
}

/// `task`.
pub(super) async fn task(
    State(api): State<Api>,
    Path((name, id)): Path<(String, String)>,
) -> Out<TaskStatus> {
    let q = queue(&api, &name)?;
    match q.status(&id).await? {
        Some(st) => ok(st),
        None => Err(ApiError::not_found(&format!(
            "task {id:?} in queue {name} (unknown, or trimmed after it finished)"
        ))),
    }
}

/// `retryTask`.
pub(super) async fn retry_task(
    State(api): State<Api>,
    Path((name, id)): Path<(String, String)>,
) -> Out<Affected> {
    let q = queue(&api, &name)?;
    match q.retry_dead(DeadSelection::One(id.clone())).await? {
        0 => Err(ApiError::not_found(&format!("dead task {id:?} in queue {name}"))),
        count => ok(Affected { count }),
    }
}

/// `retryDead`.
pub(super) async fn retry_dead(State(api): State<Api>, Path(name): Path<String>) -> Out<Affected> {
    ok(Affected { count: queue(&api, &name)?.retry_dead(DeadSelection::All).await? })
}

/// `purgeDead`.
pub(super) async fn purge_dead(State(api): State<Api>, Path(name): Path<String>) -> Out<Affected> {
    ok(Affected { count: queue(&api, &name)?.purge_dead().await? })
}

/// `purgePending`.
pub(super) async fn purge_pending(State(api): State<Api>, Path(name): Path<String>) -> Out<Affected> {
    ok(Affected { count: queue(&api, &name)?.purge_pending().await? })
}
