//! `destroy_instance`: deletes a VM's instance (guarded by its URL, so a late task cannot touch
//! the next incarnation) with a deterministic requestId, records the operation and follows it
//! with zoneOperations.get (the task going back to its queue between looks), then pushes
//! `delete_bot`.

use crate::tasks::DeleteBot;

use crate::ctx::{Ctx, request_id};
use crate::error::TaskError;
use crate::ports::compute::{ComputeError, Kind};
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

/// The requestId of a delete attempt.
pub fn delete_request_id(vm: &crate::model::Vm) -> String {
    match vm.destroy_attempt {
        0 => request_id(&format!("destroy-{}", vm.hostname)),
        n => request_id(&format!("destroy-{}-{n}", vm.hostname)),
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
    // A delete in flight: where is it now? (Compute may have forgotten it: send it again.)
    let followed = match vm.operation.as_str() {
        "" => None,
        name => ctx.compute.operation(vm.project(), vm.zone(), name).await?,
    };
    let op = match followed {
        Some(op) => Some(op),
        None => match ctx.compute.delete(vm.project(), vm.zone(), &vm.hostname, &delete_request_id(&vm)).await {
            Ok(op) => op,
            Err(e) => {
                ctx.telemetry.instance_op(&vm, "delete", e.kind.as_str(), &e.code);
                ctx.record(&vm.config, "destroy_instance", &e.code, &e.message, vm.zone(), "").await?;
                return Err(e.into());
            }
        },
    };
    if let Some(op) = op {
        if !op.done {
            if op.name != vm.operation {
                update_vm(ctx, &vm.id, |v| {
                    v.instance == vm.instance && v.destroy_attempt == vm.destroy_attempt && {
                        v.operation = op.name.clone();
                        true
                    }
                })
                .await?;
            }
            let since = now - vm.destroying.unwrap_or(now);
            return Ok(Next::After(ctx.operation_poll(since)));
        }
        if let Some(e) = op.error {
            ctx.record(&vm.config, "destroy_instance", &e.code, &e.message, vm.zone(), &op.name).await?;
            if ctx.compute.get(vm.project(), vm.zone(), &vm.hostname).await?.is_some() {
                ctx.telemetry.instance_op(&vm, "delete", e.kind.as_str(), &e.code);
                // The failed operation stays bound to its requestId: the next try needs a new one.
                update_vm(ctx, &vm.id, |v| {
                    v.instance == vm.instance && v.destroy_attempt == vm.destroy_attempt && {
                        v.destroy_attempt += 1;
                        v.operation.clear();
                        true
                    }
                })
                .await?;
                return Err(TaskError::Compute(ComputeError { kind: Kind::Transient, ..e }));
            }
            // Gone anyway.
        }
    }
    tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "instance destroyed");
    ctx.resolved(&vm.config, &["destroy_instance"]).await?;
    let pushed = ctx.push(&DeleteBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await?;
    // Counted once per instance: a run again before `delete_bot` (a retry, a duplicate task)
    // finds its DeleteBot already there.
    if pushed.added() {
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
