//! One handler per queue, named after it. Each re-reads the records, compares, acts on the
//! difference and records it with a compare-and-set; none cares why it was called.

pub mod audit_instances;
pub mod count_vms;
pub mod create_instance;
pub mod create_vm;
pub mod delete_bot;
pub mod delete_stale_bots;
pub mod destroy_instance;
pub mod drain_vm;
pub mod expand_config;
pub mod inspect_instances;
pub mod inspect_swarming;
pub mod manage_bot;
pub mod report_quota;
pub mod terminate_bot;

use std::sync::Arc;

use futures::FutureExt;
use gce_backend_queues::payload::{
    CountVms, CreateInstance, CreateVm, DeleteBot, DestroyInstance, DrainVm, ExpandConfig, ManageBot, Task,
    TerminateBot,
};
use gce_backend_queues::{DeadHook, DeadTask};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{ErrorEntry, Vm};
use crate::ports::clock::Clock;
use crate::ports::store::{Expect, Store};

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
    by_vm.contains(&queue).then(|| create_vm::parse_id(id).map(|(p, _)| p.to_owned())).flatten()
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
            if let Err(err) = store.push_error(&prefix, &e).await.and(store.add_dead_task(&prefix).await) {
                tracing::warn!(config = %prefix, error = %err, "cannot count a dead task on the Config's status");
            }
        }
        .boxed()
    })
}

/// Applies `change` to the VM `id` with a compare-and-set, re-reading on a lost race. `change`
/// returns false to leave the record alone. Returns the VM as written (or as found), `None` if
/// it is gone.
pub async fn update_vm(
    ctx: &Ctx,
    id: &str,
    change: impl Fn(&mut Vm) -> bool,
) -> Result<Option<Vm>, TaskError> {
    for _ in 0..5 {
        let Some(cur) = ctx.store.vm(id).await? else { return Ok(None) };
        let mut vm = cur.value;
        if !change(&mut vm) {
            return Ok(Some(vm));
        }
        if ctx.store.put_vm(&vm, Expect::Version(cur.version)).await? {
            return Ok(Some(vm));
        }
    }
    Err(TaskError::Conflict(id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_keys_map_to_their_config() {
        assert_eq!(config_of("expand_config", "linux").as_deref(), Some("linux"));
        assert_eq!(config_of("manage_bot", "linux-x-3").as_deref(), Some("linux-x"));
        assert_eq!(config_of("destroy_instance", "linux-3@https://x/linux-3-ab12").as_deref(), Some("linux"));
        assert_eq!(config_of("audit_instances", "p/z"), None);
        assert_eq!(config_of("manage_bot", "garbage"), None);
    }

    #[tokio::test]
    async fn a_dead_task_is_counted_on_its_config() {
        let (ctx, _) = Ctx::test();
        let hook = dead_hook(ctx.store.clone(), ctx.clock.clone());
        let t = DeadTask {
            queue: "create_instance".into(),
            id: "7".into(),
            key: "linux-2".into(),
            attempts: 8,
            reason: "retries-exhausted".into(),
            error: "compute 503: busy".into(),
        };
        hook(t).await;
        assert_eq!(ctx.store.dead_tasks("linux").await.unwrap(), 1);
        let e = &ctx.store.errors("linux").await.unwrap()[0];
        assert_eq!((e.stage.as_str(), e.code.as_str()), ("create_instance", "dead"));
        assert!(e.message.contains("linux-2") && e.message.contains("8 runs"), "{e:?}");
    }
}
