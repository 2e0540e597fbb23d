//! The queue registry: one handler per queue, named after it. Each re-reads the records,
//! compares, acts on the difference and records it with a compare-and-set; none cares why it
//! was called. Nothing but the binary imports this module: handlers hand their follow-ups to
//! the queues through the payloads of [`crate::work`].

use std::sync::Arc;

use futures::FutureExt;
use gce_backend_queues::{DeadHook, DeadTask, Task};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::ErrorEntry;
use crate::ports::clock::Clock;
use crate::ports::store::Store;
use crate::work::{Next, config_of};

/// The one list of the pipeline's queues: each handler module, named after its queue, and the
/// payload it declares. Generates the modules, the payloads' re-exports (declared in [`crate::work`]), [`QUEUES`]
/// and [`visit`].
macro_rules! registry {
    ($($handler:ident => $payload:ident),+ $(,)?) => {
        $(pub mod $handler;)+
        $(pub use crate::work::$payload;)+

        /// Every queue of the pipeline, by name; part of the Redis key layout, so renaming one
        /// strands the tasks queued under the old name.
        pub const QUEUES: &[&str] = &[$(<$payload as Task>::QUEUE),+];

        /// Hands every queue's payload type and handler to `v` (the workers register from it).
        pub fn visit<V: Visitor>(v: &mut V) {
            $(v.queue::<$payload>(|ctx, t| Box::pin(async move { left_alone(&ctx, $handler::run(&ctx, t).await).await }));)+
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
    read_demand => ReadDemand,
    park_vm => ParkVm,
    bulk_insert => BulkInsert,
    pool_resources => PoolResources,
    audit_templates => AuditTemplates,
);

/// A run that met a record a newer build wrote in a format this one does not act on: done, the
/// record left to that build (said once on its Config's status, and counted); any other result
/// as it is.
async fn left_alone(ctx: &Ctx, ran: Result<Next, TaskError>) -> Result<Next, TaskError> {
    match ran {
        Err(TaskError::Store(crate::ports::store::StoreError::Newer { key, format })) => {
            crate::records::writes::left_to_newer(ctx, &key, format).await?;
            Ok(Next::Done)
        }
        ran => ran,
    }
}

/// A queue's handler, as [`visit`] hands it out.
pub type Run<T> = fn(Ctx, T) -> futures::future::BoxFuture<'static, Result<Next, TaskError>>;

/// Receives every queue of the pipeline from [`visit`].
pub trait Visitor {
    /// One queue: its payload type `T` (which names the queue) and its handler.
    fn queue<T: Task>(&mut self, run: Run<T>);
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
                vm: crate::work::vm_of(&t.queue, &t.key).map(str::to_owned),
                unknown: Default::default(),
            };
            if let Err(err) = store.push_error(&prefix, &e).await.and(store.bump(&prefix, crate::model::counters::DEAD_TASKS).await) {
                tracing::warn!(config = %prefix, error = %err, "cannot count a dead task on the Config's status");
            }
        }
        .boxed()
    })
}

#[cfg(test)]
mod tests;
