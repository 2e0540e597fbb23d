//! Unit tests of the queue actions: each one that affects tasks writes one audit entry, against
//! the task's Config or in the global list; one that finds nothing writes none.

use gce_backend_queues::WorkerId;
use gce_backend_queues::engine::{Ack, Resolution};

use super::*;
use crate::model::GLOBAL_AUDIT;
use crate::work::{CreateVm, ExpandConfig, InspectSwarming};

/// Pushes `task` and fails it for good: it is dead. Returns its status.
async fn dead<T: gce_backend_queues::Task>(ctx: &Ctx, task: &T) -> TaskStatus {
    ctx.push(task).await.unwrap();
    let q = ctx.queues.get(T::QUEUE);
    let worker = WorkerId { group: "test".into(), id: "test".into() };
    let got = q.engine().take(q.spec(), &worker, 10).await.unwrap().tasks;
    let acks: Vec<Ack> = got
        .iter()
        .map(|l| Ack {
            id: l.id.clone(),
            token: l.token.clone(),
            resolution: Resolution::Fail { error: "x".into() },
        })
        .collect();
    q.engine().finish(q.spec(), &acks).await.unwrap();
    q.dead(10).await.unwrap().into_iter().find(|t| t.key == task.key()).expect("dead")
}

#[tokio::test]
async fn retrying_a_task_is_recorded_against_its_config_or_globally() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    let t = dead(&ctx, &CreateVm { id: "linux-0".into() }).await;
    assert_eq!(retry_task(&ctx, &t, "alice").await.unwrap(), 1);
    assert!(matches!(retry_task(&ctx, &t, "alice").await, Err(OpError::NotFound(_))), "not dead any more");
    let trail = ctx.ports.store.audit("linux", 0, 10).await.unwrap();
    assert_eq!(trail.len(), 1, "{trail:?}");
    assert_eq!((trail[0].actor.as_str(), trail[0].action), ("alice", AuditAction::RetryTask));
    assert!(trail[0].detail.starts_with("queue create_vm: task "), "{}", trail[0].detail);
    // A task of no one Config (a Swarming server) goes into the global list.
    let t = dead(&ctx, &InspectSwarming { server: "https://s.example".into() }).await;
    retry_task(&ctx, &t, "bob").await.unwrap();
    let global = ctx.ports.store.audit(GLOBAL_AUDIT, 0, 10).await.unwrap();
    assert_eq!((global.len(), global[0].actor.as_str()), (1, "bob"));
}

#[tokio::test]
async fn queue_wide_retries_and_purges_go_into_the_global_list() {
    let (ctx, _) = Ctx::test();
    dead(&ctx, &ExpandConfig { prefix: "linux".into() }).await;
    assert_eq!(retry_dead(&ctx, "expand_config", "ops").await.unwrap(), 1);
    assert_eq!(purge_pending(&ctx, "expand_config", "ops").await.unwrap(), 1);
    assert_eq!(purge_dead(&ctx, "expand_config", "ops").await.unwrap(), 0, "nothing: no entry");
    assert!(matches!(purge_dead(&ctx, "nope", "ops").await, Err(OpError::NotFound(_))));
    let global = ctx.ports.store.audit(GLOBAL_AUDIT, 0, 10).await.unwrap();
    let got: Vec<(AuditAction, &str)> = global.iter().map(|e| (e.action, e.detail.as_str())).collect();
    assert_eq!(
        got,
        [
            (AuditAction::PurgePending, "queue expand_config: 1 pending tasks dropped"),
            (AuditAction::RetryDead, "queue expand_config: 1 dead tasks put back"),
        ]
    );
    assert!(ctx.ports.store.audit("linux", 0, 10).await.unwrap().is_empty());
}
