//! Queue methods (seed 003 terms): every queue's counts, pending and dead tasks (paged), one
//! task's status, retry and purge. A task belongs to the Config its queue and key name (the one
//! rule, `work::config_of`); callers other than admins see and retry only the tasks of Configs
//! they may read (and change). Each task answered says both (`config`, `may_retry`), so no
//! client decides them again.

use std::collections::HashMap;

use axum::Extension;
use axum::extract::{Path, State};
use gce_backend_jobs::model::ConfigRecord;
use gce_backend_jobs::operate;
use gce_backend_jobs::tasks::QUEUES;
use gce_backend_queues::{Queue, TaskStatus};

use super::auth::{Caller, Role};
use super::configs::readable;
use super::error::ApiError;
use super::io::{Out, Params, ok};
use super::state::Api;
use super::types::{Affected, Page, QueueEntry, QueueList, TaskEntry, TaskList};

fn queue<'a>(api: &'a Api, name: &str) -> Result<&'a Queue, ApiError> {
    Ok(operate::queues::queue(&api.ctx, name)?)
}

/// The Config a task works for (the one rule, `work::config_of`: a prefix, a VM id or
/// `<VM id>@<guard>`, by queue; a project, zone or server belongs to no one Config).
fn config_of(t: &TaskStatus) -> Option<String> {
    gce_backend_jobs::work::config_of(&t.queue, &t.key)
}

/// The Config record a non-admin caller reaches a task through: readable, else hidden (404).
async fn through(api: &Api, caller: &Caller, t: &TaskStatus) -> Result<Option<ConfigRecord>, ApiError> {
    if caller.role == Role::Admin {
        return Ok(None);
    }
    let hidden = || ApiError::not_found(&format!("task {:?} in queue {}", t.task_id, t.queue));
    let prefix = config_of(t).ok_or_else(hidden)?;
    readable(api, caller, &prefix).await.map(|r| Some(r.value)).map_err(|_| hidden())
}

/// `t` as the API answers it, seen through `rec` (the record [`through`] gave): with its
/// Config and whether the caller may retry it (an admin any task, else a writer of its Config).
fn entry(caller: &Caller, t: TaskStatus, rec: Option<&ConfigRecord>) -> TaskEntry {
    let may_retry = caller.role == Role::Admin || rec.is_some_and(|r| caller.may_write(&r.config));
    TaskEntry { config: config_of(&t), status: t, may_retry }
}

/// One page: `tasks` read from `offset` (one more than `limit` if there are more), without the
/// tasks the caller may not see (a page may then be shorter than `limit`). Tasks past
/// [`Page::MAX_OFFSET`] are reached by purging or retrying.
async fn paged(
    api: &Api,
    caller: &Caller,
    mut tasks: Vec<TaskStatus>,
    offset: usize,
    limit: usize,
) -> TaskList {
    let continuation_token = Page::cut(&mut tasks, offset, limit);
    // One look per Config named on the page, not one per task: `None` when hidden.
    let mut seen_through: HashMap<Option<String>, Option<Option<ConfigRecord>>> = HashMap::new();
    let mut seen = Vec::with_capacity(tasks.len());
    for t in tasks {
        let owner = config_of(&t);
        if !seen_through.contains_key(&owner) {
            let rec = through(api, caller, &t).await.ok();
            seen_through.insert(owner.clone(), rec);
        }
        if let Some(Some(rec)) = seen_through.get(&owner).map(Option::as_ref) {
            seen.push(entry(caller, t, rec.as_ref()));
        }
    }
    TaskList { tasks: seen, continuation_token }
}

/// `listQueues`.
pub(super) async fn list(State(api): State<Api>) -> Out<QueueList> {
    let mut queues = Vec::with_capacity(QUEUES.len());
    for name in QUEUES {
        let counts = api.ctx.queues.get(name).counts().await?;
        queues.push(QueueEntry { name: (*name).to_owned(), counts });
    }
    ok(QueueList { queues })
}

/// `pendingTasks`: pending first, then delayed.
pub(super) async fn pending(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Params(page): Params<Page>,
) -> Out<TaskList> {
    let q = queue(&api, &name)?;
    let (offset, limit) = (page.offset()?, page.limit()?);
    let mut tasks = q.pending(limit + 1, offset).await?;
    if tasks.len() <= limit {
        let pending = q.counts().await?.pending as usize;
        let skip = offset.saturating_sub(pending);
        tasks.extend(q.delayed(limit + 1 - tasks.len(), skip).await?);
    }
    ok(paged(&api, &caller, tasks, offset, limit).await)
}

/// `deadTasks`.
pub(super) async fn dead(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Params(page): Params<Page>,
) -> Out<TaskList> {
    let q = queue(&api, &name)?;
    let (offset, limit) = (page.offset()?, page.limit()?);
    let tasks: Vec<_> = q.dead(offset + limit + 1).await?.into_iter().skip(offset).collect();
    ok(paged(&api, &caller, tasks, offset, limit).await)
}

/// The task `id` of queue `name`, if the caller may see it.
async fn find(
    api: &Api,
    caller: &Caller,
    name: &str,
    id: &str,
) -> Result<(TaskStatus, Option<ConfigRecord>), ApiError> {
    let q = queue(api, name)?;
    let st = q.status(id).await?.ok_or_else(|| {
        ApiError::not_found(&format!("task {id:?} in queue {name} (unknown, or trimmed after it finished)"))
    })?;
    let rec = through(api, caller, &st).await?;
    Ok((st, rec))
}

/// `task`.
pub(super) async fn task(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path((name, id)): Path<(String, String)>,
) -> Out<TaskEntry> {
    let (t, rec) = find(&api, &caller, &name, &id).await?;
    ok(entry(&caller, t, rec.as_ref()))
}

/// `retryTask`: by an admin, or a writer of the task's Config (recorded in its audit trail).
pub(super) async fn retry_task(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path((name, id)): Path<(String, String)>,
) -> Out<Affected> {
    let (t, rec) = find(&api, &caller, &name, &id).await?;
    if let Some(rec) = rec.filter(|r| !caller.may_write(&r.config)) {
        let msg =
            format!("token {:?} may not retry the tasks of Config {:?}", caller.name, rec.config.prefix);
        return Err(ApiError::forbidden(msg));
    }
    ok(Affected { count: operate::queues::retry_task(&api.ctx, &t, &caller.name).await? })
}

/// `retryDead`.
pub(super) async fn retry_dead(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Out<Affected> {
    ok(Affected { count: operate::queues::retry_dead(&api.ctx, &name, &caller.name).await? })
}

/// `purgeDead`.
pub(super) async fn purge_dead(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Out<Affected> {
    ok(Affected { count: operate::queues::purge_dead(&api.ctx, &name, &caller.name).await? })
}

/// `purgePending`.
pub(super) async fn purge_pending(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Out<Affected> {
    ok(Affected { count: operate::queues::purge_pending(&api.ctx, &name, &caller.name).await? })
}
