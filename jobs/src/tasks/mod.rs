//! One handler per queue, named after it. Each re-reads the records, compares, acts on the
//! difference and records it with a compare-and-set; none cares why it was called.

/// Declares a task payload: ids only, never records, unknown fields refused; its queue name and
/// dedupe key. Payloads outlive deploys in Redis: each is pinned by a golden test
/// (`jobs/tests/wire.rs`).
macro_rules! task {
    ($(#[$doc:meta])* $name:ident, $queue:literal, { $($(#[$fdoc:meta])* $field:ident),+ }, |$s:ident| $key:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: String,)+
        }
        impl gce_backend_queues::Task for $name {
            const QUEUE: &'static str = $queue;
            fn key(&$s) -> String {
                $key
            }
        }
    };
}

/// The one list of the pipeline's queues: each handler module, named after its queue, and the
/// payload it declares. Generates the modules, the payload re-exports, [`QUEUES`] and [`visit`].
macro_rules! registry {
    ($($handler:ident => $payload:ident),+ $(,)?) => {
        $(pub mod $handler;)+
        $(pub use $handler::$payload;)+

        /// Every queue of the pipeline, by name; part of the Redis key layout, so renaming one
        /// strands the tasks queued under the old name.
        pub const QUEUES: &[&str] = &[$(<$payload as Task>::QUEUE),+];

        /// Hands every queue's payload type and handler to `v` (the workers register from it).
        pub fn visit<V: Visitor>(v: &mut V) {
            $(v.queue::<$payload>(|ctx, t| Box::pin(async move { $handler::run(&ctx, t).await }));)+
        }
    };
}

registry!(
    expand_config => ExpandConfig,
    create_vm => CreateVm,
    create_instance => CreateInstance,
    manage_bot => ManageBot,
    inspect_swarming => InspectSwarming,
    inspect_instances => InspectInstances,
    terminate_bot => TerminateBot,
    destroy_instance => DestroyInstance,
    delete_bot => DeleteBot,
    drain_vm => DrainVm,
    audit_instances => AuditInstances,
    delete_stale_bots => DeleteStaleBots,
    count_vms => CountVms,
    report_quota => ReportQuota,
);

/// What a handler asks for after a run: nothing more, or to look again after a while (the
/// worker pushes the same task again, delayed; a pending operation, a bot not yet connected, a
/// backoff, the next batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Done for now.
    Done,
    /// Run again after this delay (attempts are not spent on waiting).
    After(std::time::Duration),
}

/// A queue's handler, as [`visit`] hands it out.
pub type Run<T> = fn(Ctx, T) -> futures::future::BoxFuture<'static, Result<Next, TaskError>>;

/// Receives every queue of the pipeline from [`visit`].
pub trait Visitor {
    /// One queue: its payload type `T` (which names the queue) and its handler.
    fn queue<T: Task>(&mut self, run: Run<T>);
}

use std::sync::Arc;

use futures::FutureExt;
use gce_backend_queues::{DeadHook, DeadTask, Task};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{ErrorEntry, Vm};
use crate::ports::clock::Clock;
use crate::ports::store::{Expect, Store, Versioned};

/// The Config a task of `queue` with `key` is about, if any (keys are prefixes, VM ids, or
/// `<VM id>@<guard>`).
pub fn config_of(queue: &str, key: &str) -> Option<String> {
    if [ExpandConfig::QUEUE, CountVms::QUEUE].contains(&queue) {
        return Some(key.to_owned());
    }
    let by_vm = [
        CreateVm::QUEUE,
        CreateInstance::QUEUE,
        ManageBot::QUEUE,
        DrainVm::QUEUE,
        TerminateBot::QUEUE,
        DestroyInstance::QUEUE,
        DeleteBot::QUEUE,
    ];
    let id = key.split_once('@').map_or(key, |(id, _)| id);
    by_vm.contains(&queue).then(|| crate::naming::parse_id(id).map(|(p, _)| p.to_owned())).flatten()
}

/// A queue hook that counts a dead task on its Config's status and records why (code `dead`).
pub fn dead_hook(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> DeadHook {
    Arc::new(move |t: DeadTask| {
        let (store, now) = (store.clone(), clock.now());
        async move {
            let Some(prefix) = config_of(&t.queue, &t.key) else { return };
            let e = ErrorEntry {
                time: now,
                stage: t.queue.clone(),
                code: "dead".into(),
                message: format!("task {} ({}) is dead after {} runs ({}): {}", t.id, t.key, t.attempts, t.reason, t.error),
                zone: String::new(),
                operation: String::new(),
                resolved: None,
            };
            if let Err(err) = store.push_error(&prefix, &e).await.and(store.bump(&prefix, crate::model::counters::DEAD_TASKS).await) {
                tracing::warn!(config = %prefix, error = %err, "cannot count a dead task on the Config's status");
            }
        }
        .boxed()
    })
}

/// A VM record that does not decode: its instance is looked up by label in its Config's
/// project and zone and the record rebuilt around it, drained, so the normal path terminates
/// its bot, destroys the instance and a fresh VM follows; without an instance (or a readable
/// Config) the record is dropped and the Config expanded again. Reported on the Config's status.
///
/// `version` is the one the corrupt record was read at: every write names it, so a record that
/// another run already repaired (or a new VM since) is never touched.
pub async fn quarantine(ctx: &Ctx, id: &str, error: &str, version: Option<u64>) -> Result<(), TaskError> {
    let version = match version {
        Some(v) => v,
        None => match ctx.store.vm_version(id).await? {
            Some(v) => v,
            None => return Ok(()),
        },
    };
    let Some((prefix, index)) = crate::naming::parse_id(id) else {
        ctx.store.delete_vm(id, version).await?;
        return Ok(());
    };
    // A Config that cannot be read (store down, record corrupt) is an error: try again later,
    // rather than drop a record whose instance was not looked for.
    let config = ctx.store.config(prefix).await?.map(|c| c.value.config);
    let mut found = None;
    // Its instance, in any zone of its Config (a static pool has none).
    if let Some(c) = config.as_ref().filter(|c| !c.is_static()) {
        let filter = format!(
            "(labels.{} = \"{}\") (labels.{} = \"{id}\")",
            crate::config::labels::DEPLOYMENT,
            ctx.deployment,
            crate::config::labels::VM
        );
        for zone in c.zone_names() {
            let listed = ctx.compute.list(&c.attributes.project, zone, &filter, None).await?.0;
            if let Some(inst) = listed.into_iter().find(|i| i.belongs_to(id, &ctx.deployment)) {
                found = Some((inst, zone.to_owned()));
                break;
            }
        }
    }
    let message = match (&config, &found) {
        (Some(c), Some((inst, zone))) => {
            let now = ctx.now();
            let attributes = c.attributes_in(zone);
            let vm = Vm {
                id: id.to_owned(),
                config: prefix.to_owned(),
                index,
                hostname: inst.name.clone(),
                attributes,
                swarming: c.swarming.clone(),
                lifetime: c.lifetime.0,
                timeout: c.timeout.0,
                configured: now,
                insert_sent: Some(now),
                instance: Some(inst.placed()),
                drained: true,
                ..Vm::default()
            };
            if ctx.store.put_vm(&vm, Expect::Version(version)).await? {
                ctx.push(&ManageBot { id: id.to_owned() }).await?;
            }
            format!(
                "VM {id}: its record does not decode ({error}); rebuilt around instance {} and drained",
                inst.name
            )
        }
        _ => {
            if ctx.store.delete_vm(id, version).await? {
                ctx.push(&ExpandConfig { prefix: prefix.to_owned() }).await?;
            }
            format!(
                "VM {id}: its record does not decode ({error}) and no instance of it was found; record dropped"
            )
        }
    };
    ctx.record_once(prefix, "quarantine", "corrupt", &message).await
}

/// The one way a VM record goes without going through GCE: when it has no instance and `only`
/// holds for it (read fresh, deleted with a compare-and-set).
pub async fn drop_uncreated(ctx: &Ctx, id: &str, only: impl Fn(&Vm) -> bool) -> Result<(), TaskError> {
    if let Some(cur) = ctx.vm(id).await?
        && cur.value.instance.is_none()
        && only(&cur.value)
    {
        ctx.store.delete_vm(id, cur.version).await?;
    }
    Ok(())
}

/// Applies `change` to the Config record `prefix` with a compare-and-set, re-reading on a lost
/// race (a few times, then a Conflict). `change` returns false to leave it alone, or an error to
/// refuse. Returns the record as written (or as found) and whether this call wrote it; `None`
/// when there is no such Config.
pub async fn update_config<E: From<TaskError>>(
    ctx: &Ctx,
    prefix: &str,
    change: impl Fn(&mut crate::model::ConfigRecord) -> Result<bool, E>,
) -> Result<Option<(crate::model::ConfigRecord, bool)>, E> {
    for _ in 0..5 {
        let Some(cur) = ctx.store.config(prefix).await.map_err(TaskError::from)? else { return Ok(None) };
        let mut rec = cur.value;
        if !change(&mut rec)? {
            return Ok(Some((rec, false)));
        }
        let expect = crate::ports::store::Expect::Version(cur.version);
        if ctx.store.put_config(&rec, expect).await.map_err(TaskError::from)? {
            return Ok(Some((rec, true)));
        }
    }
    Err(TaskError::Conflict(format!("cfg {prefix}")).into())
}

/// Applies `change` to the VM `id` with a compare-and-set, re-reading on a lost race. `change`
/// returns false to leave the record alone. Returns the VM as written (or as found), `None` if
/// it is gone.
pub async fn update_vm(
    ctx: &Ctx,
    id: &str,
    change: impl Fn(&mut Vm) -> bool,
) -> Result<Option<Vm>, TaskError> {
    Ok(write_vm(ctx, id, change).await?.map(|(vm, _)| vm))
}

/// [`update_vm`] that also says whether this call wrote the change (false: `change` declined,
/// e.g. because another run already made it), so an effect of the write happens once.
pub async fn write_vm(
    ctx: &Ctx,
    id: &str,
    change: impl Fn(&mut Vm) -> bool,
) -> Result<Option<(Vm, bool)>, TaskError> {
    Ok(write_vm_loop(ctx, id, None, change).await?.map(|(cur, wrote)| (cur.value, wrote)))
}

/// [`write_vm`] starting from `known`, the record as this run read it: the compare-and-set names
/// its version, so nothing is read again unless another run wrote since. Returns the record as
/// written, with its new version (a write adds one), so a run may write again without a read.
pub async fn write_vm_at(
    ctx: &Ctx,
    known: Versioned<Vm>,
    change: impl Fn(&mut Vm) -> bool,
) -> Result<Option<(Versioned<Vm>, bool)>, TaskError> {
    let id = known.value.id.clone();
    write_vm_loop(ctx, &id, Some(known), change).await
}

async fn write_vm_loop(
    ctx: &Ctx,
    id: &str,
    mut known: Option<Versioned<Vm>>,
    change: impl Fn(&mut Vm) -> bool,
) -> Result<Option<(Versioned<Vm>, bool)>, TaskError> {
    for _ in 0..5 {
        let cur = match known.take() {
            Some(cur) => cur,
            None => match ctx.vm(id).await? {
                Some(cur) => cur,
                None => return Ok(None),
            },
        };
        let mut vm = cur.value;
        if !change(&mut vm) {
            return Ok(Some((Versioned { value: vm, version: cur.version }, false)));
        }
        if ctx.store.put_vm(&vm, Expect::Version(cur.version)).await? {
            return Ok(Some((Versioned { value: vm, version: cur.version + 1 }, true)));
        }
    }
    Err(TaskError::Conflict(id.to_owned()))
}

#[cfg(test)]
mod tests;
