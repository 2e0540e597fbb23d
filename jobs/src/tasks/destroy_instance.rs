//! `destroy_instance`: removes a VM's machine through its provider (guarded by the instance URL,
//! so a late task cannot touch the next incarnation; Compute Engine: a delete with a
//! deterministic requestId, its operation recorded and followed, the task going back to its
//! queue between looks), then pushes `delete_bot`.

use crate::tasks::DeleteBot;

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::tasks::Next;
use crate::tasks::update_vm;
use crate::telemetry::Stage;

task!(
    /// Delete a VM's instance.
    DestroyInstance, "destroy_instance", { /// VM id.
    id, /// The instance URL (guard).
    url }, |self| format!("{}@{}", self.id, self.url)
);

impl DestroyInstance {
    /// The task that deletes `vm`'s instance (none while it has none).
    pub fn of(vm: &crate::model::Vm) -> Option<Self> {
        vm.url().map(|url| DestroyInstance { id: vm.id.clone(), url: url.to_owned() })
    }
}

/// Handles one task.
pub async fn run(ctx: &Ctx, t: DestroyInstance) -> Result<Next, TaskError> {
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = cur.value;
    if vm.url() != Some(t.url.as_str()) {
        return Ok(Next::Done);
    }
    let now = ctx.now();
    let vm = match vm.destroying {
        Some(_) => vm,
        None => {
            let started = update_vm(ctx, &vm.id, |v| {
                v.instance == vm.instance && v.destroying.is_none() && {
                    v.destroying = Some(now);
                    true
                }
            })
            .await?;
            match started {
                Some(v) if v.instance == vm.instance => v,
                _ => return Ok(Next::Done),
            }
        }
    };
    // Its provider removes the machine (Compute Engine: a delete, its operation followed).
    let next = ctx.providers.get(ctx, &vm.provider).await?.remove(ctx, vm.clone()).await?;
    if next != Next::Done {
        return Ok(next);
    }
    let fixed = crate::tasks::create_instance::is_static(ctx, &vm);
    let done = if fixed { "static machine released (left running)" } else { "instance destroyed" };
    tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "{done}");
    ctx.resolved(&vm.config, &["destroy_instance"]).await?;
    let pushed = ctx.push(&DeleteBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await?;
    // Counted once per instance: a run again before `delete_bot` (a retry, a duplicate task)
    // finds its DeleteBot already there. A static machine is released, not deleted.
    if pushed.added() && !fixed {
        ctx.telemetry.instance_op(&vm, "delete", "ok", "");
        if let Some(placed) = &vm.instance {
            ctx.telemetry.lifecycle(&vm, Stage::Lifetime, placed.created, ctx.now());
        }
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests {
    use crate::tasks::DeleteBot;

    use super::*;
    use crate::ctx::request_id;
    use crate::ports::compute::{ComputeError, Operation};
    use crate::testing::created;

    #[tokio::test]
    async fn a_late_task_for_another_incarnation_does_nothing() {
        let (ctx, f) = Ctx::test();
        ctx.seed_vm("linux-0", created(ctx.now())).await;
        run(&ctx, DestroyInstance { id: "linux-0".into(), url: "https://old/url".into() }).await.unwrap();
        run(&ctx, DestroyInstance { id: "linux-9".into(), url: "x".into() }).await.unwrap();
        assert!(f.compute.calls().is_empty());
    }

    #[tokio::test]
    async fn deletes_with_a_deterministic_request_id_and_already_gone_counts_as_done() {
        let (ctx, f) = Ctx::test();
        let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
        run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
        assert_eq!(
            f.compute.calls(),
            [format!("delete linux-0-abcd {}", request_id("destroy-linux-0-abcd"))]
        );
        // Run again before delete_bot (a duplicate task): the deletion is counted once.
        run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
        let m = ctx.telemetry.text();
        let ok = r#"gce_backend_instance_operations_total{config="linux",zone="z",op="delete",result="ok",code=""} 1"#;
        assert!(m.lines().any(|l| l == ok), "{m}");
        assert!(m.lines().any(|l| l == r#"gce_backend_vm_lifetime_seconds_count{config="linux"} 1"#), "{m}");
        assert_eq!(ctx.taken::<DeleteBot>().await, [DeleteBot { id: vm.id, hostname: vm.hostname }]);
    }

    #[tokio::test]
    async fn a_failed_operation_is_recorded_and_retried_with_a_new_request_id() {
        let (ctx, f) = Ctx::test();
        let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
        let inst = crate::testing::FakeCompute::instance(&vm.hostname, &[]);
        f.compute.instances.lock().unwrap().insert(vm.hostname.clone(), inst);
        let failed = Operation {
            name: "op".into(),
            done: true,
            error: Some(ComputeError::from_operation("INTERNAL_ERROR", Some(500), "x")),
        };
        f.compute.deletes.lock().unwrap().push_back(Ok(Some(failed)));
        let e = run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap_err();
        assert_eq!(e.class(), crate::Class::Transient);
        assert!(ctx.taken::<DeleteBot>().await.is_empty());
        assert_eq!(ctx.store.errors("linux").await.unwrap()[0].code, "INTERNAL_ERROR");
        run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
        let last = f.compute.calls().into_iter().rev().find(|c| c.starts_with("delete")).unwrap();
        assert_eq!(last, format!("delete linux-0-abcd {}", request_id("destroy-linux-0-abcd-1")));
        assert_eq!(ctx.taken::<DeleteBot>().await.len(), 1);
    }

    #[tokio::test]
    async fn a_failed_operation_on_an_instance_already_gone_counts_as_done() {
        let (ctx, f) = Ctx::test();
        let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
        let failed = Operation {
            name: "op".into(),
            done: true,
            error: Some(ComputeError::from_operation("RESOURCE_NOT_FOUND", Some(404), "x")),
        };
        f.compute.deletes.lock().unwrap().push_back(Ok(Some(failed)));
        run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
        assert_eq!(ctx.taken::<DeleteBot>().await.len(), 1);
    }

    #[tokio::test]
    async fn a_pending_delete_is_followed_with_zone_operations_get_until_done() {
        let (ctx, f) = Ctx::test();
        let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
        let pending = Operation { name: "op-9".into(), done: false, error: None };
        f.compute.deletes.lock().unwrap().push_back(Ok(Some(pending.clone())));
        let next = run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
        assert_eq!(next, Next::After(std::time::Duration::from_millis(250)), "no worker waits on it");
        assert_eq!(ctx.store.vm("linux-0").await.unwrap().unwrap().value.operation, "op-9");
        f.compute.operations.lock().unwrap().push_back(Ok(Some(pending)));
        f.clock.advance(chrono::Duration::seconds(2));
        let next = run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
        assert_eq!(next, Next::After(std::time::Duration::from_secs(2)), "twice as late");
        assert!(ctx.taken::<DeleteBot>().await.is_empty());
        run(&ctx, DestroyInstance::of(&vm).unwrap()).await.unwrap();
        let rid = request_id("destroy-linux-0-abcd");
        assert_eq!(
            f.compute.calls(),
            [format!("delete linux-0-abcd {rid}"), "operation op-9".into(), "operation op-9".into()],
            "the delete is sent once"
        );
        assert_eq!(ctx.taken::<DeleteBot>().await.len(), 1);
    }
}
