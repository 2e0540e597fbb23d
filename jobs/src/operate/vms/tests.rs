//! Unit tests of the VM operations: recycle, list_vms (paging, state filter, not found) and vm.

use chrono::Duration;

use super::*;
use crate::model::{Bot, Observed};
use crate::testing::created;
use crate::work::{ExpandConfig, ManageBot};

/// Config `prefix` as an API handler reads it before listing (`None`: there is none).
async fn config(ctx: &Ctx, prefix: &str) -> Option<Config> {
    ctx.ports.store.config(prefix).await.unwrap().map(|r| r.value.config)
}

#[tokio::test]
async fn recycling_drains_a_vm_for_the_normal_path_and_a_new_incarnation_follows() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    ctx.seed_vm("linux-0", created(ctx.now())).await;
    ctx.seed_vm("linux-1", |_| {}).await; // not yet sent to GCE
    let vm = recycle(&ctx, "linux-0", "alice").await.unwrap();
    assert!(vm.drained && ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value.drained);
    assert_eq!(ctx.taken::<ManageBot>().await, [ManageBot { id: "linux-0".into() }], "retired as drained");
    assert_eq!(recycle(&ctx, "linux-0", "alice").await.unwrap(), vm, "again: nothing changes");
    // Never sent: dropped at once, and the Config expanded so it is made again.
    recycle(&ctx, "linux-1", "alice").await.unwrap();
    assert!(ctx.ports.store.vm("linux-1").await.unwrap().is_none());
    assert_eq!(ctx.taken::<ExpandConfig>().await, [ExpandConfig { prefix: "linux".into() }]);
    match recycle(&ctx, "linux-7", "alice").await {
        Err(e @ OpError::NotFound(_)) => assert_eq!(e.to_string(), "VM linux-7 not found"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn vms_are_listed_by_index_in_pages() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 12).await;
    for i in 0..12 {
        ctx.seed_vm(&format!("linux-{i}"), |_| {}).await;
    }
    ctx.seed_vm("linux-x-0", |_| {}).await; // another Config whose prefix starts the same
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let (page, next) =
            list_vms(&ctx, "linux", config(&ctx, "linux").await.as_ref(), None, after.as_deref(), 5)
                .await
                .unwrap();
        pages += 1;
        seen.extend(page.into_iter().map(|v| v.vm.id));
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let want: Vec<String> = (0..12).map(|i| format!("linux-{i}")).collect();
    assert_eq!((seen, pages), (want, 3));
    // A page that ends exactly at the last VM says there is no next one.
    let (page, next) =
        list_vms(&ctx, "linux", config(&ctx, "linux").await.as_ref(), None, Some("linux-6"), 5)
            .await
            .unwrap();
    assert_eq!((page.len(), next), (5, None));
    // The limit is at least one.
    assert_eq!(
        list_vms(&ctx, "linux", config(&ctx, "linux").await.as_ref(), None, None, 0).await.unwrap().0.len(),
        1
    );
}

#[tokio::test]
async fn a_state_filter_lists_only_vms_in_that_state() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 6).await;
    for i in 0..6 {
        ctx.seed_vm(&format!("linux-{i}"), |v| {
            if i % 2 == 1 {
                created(ctx.now())(v);
                v.connected = Some(ctx.now());
            }
        })
        .await;
    }
    let (page, next) =
        list_vms(&ctx, "linux", config(&ctx, "linux").await.as_ref(), Some(VmState::Connected), None, 2)
            .await
            .unwrap();
    let ids: Vec<&str> = page.iter().map(|v| v.vm.id.as_str()).collect();
    assert_eq!((ids, next.as_deref()), (vec!["linux-1", "linux-3"], Some("linux-3")));
    let (page, next) = list_vms(
        &ctx,
        "linux",
        config(&ctx, "linux").await.as_ref(),
        Some(VmState::Connected),
        Some("linux-3"),
        2,
    )
    .await
    .unwrap();
    assert_eq!((page.len(), page[0].vm.id.as_str(), next), (1, "linux-5", None));
    let (page, _) =
        list_vms(&ctx, "linux", config(&ctx, "linux").await.as_ref(), Some(VmState::Creating), None, 10)
            .await
            .unwrap();
    assert!(page.iter().all(|v| v.state == VmState::Creating) && page.len() == 3);
    assert!(
        list_vms(&ctx, "linux", config(&ctx, "linux").await.as_ref(), Some(VmState::Draining), None, 10)
            .await
            .unwrap()
            .0
            .is_empty()
    );
}

#[tokio::test]
async fn listing_an_unknown_config_is_not_found_and_an_empty_one_is_empty() {
    let (ctx, _) = Ctx::test();
    match list_vms(&ctx, "nope", config(&ctx, "nope").await.as_ref(), None, None, 10).await {
        Err(e @ OpError::NotFound(_)) => assert_eq!(e.to_string(), "Config nope not found"),
        other => panic!("{other:?}"),
    }
    ctx.seed_config("linux", 0).await;
    assert_eq!(
        list_vms(&ctx, "linux", config(&ctx, "linux").await.as_ref(), None, None, 10).await.unwrap(),
        (Vec::new(), None)
    );
}

#[tokio::test]
async fn one_vm_shows_its_state_deadline_and_last_bot_observation() {
    let (ctx, _) = Ctx::test();
    let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
    let seen = Observed {
        unknown: Default::default(),
        bot: Bot { id: vm.hostname.clone(), ..Bot::default() },
        at: ctx.now(),
        idle_since: None,
    };
    ctx.ports.store.put_bots(std::slice::from_ref(&seen)).await.unwrap();
    let v = super::vm(&ctx, "linux-0", None).await.unwrap().0;
    assert_eq!(v.state, VmState::Running);
    assert_eq!(v.deadline, Some(ctx.now() + Duration::seconds(vm.lifetime as i64)));
    assert_eq!((v.bot, v.vm), (Some(seen), vm));
    assert!(matches!(super::vm(&ctx, "linux-9", None).await, Err(OpError::NotFound(_))));
}

#[tokio::test]
async fn a_recycle_is_recorded_once_in_its_configs_audit_trail() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    ctx.seed_vm("linux-0", created(ctx.now())).await;
    recycle(&ctx, "linux-0", "alice").await.unwrap();
    recycle(&ctx, "linux-0", "alice").await.unwrap(); // drained already: nothing
    assert!(recycle(&ctx, "linux-7", "alice").await.is_err());
    let trail = ctx.ports.store.audit("linux", 0, 10).await.unwrap();
    assert_eq!(trail.len(), 1, "{trail:?}");
    let e = &trail[0];
    assert_eq!((e.actor.as_str(), e.action), ("alice", crate::model::AuditAction::Recycle));
    assert!(e.detail.starts_with("VM linux-0 ("), "{}", e.detail);
    assert_eq!(e.before_revision.as_deref(), Some("r1"));
}

#[tokio::test]
async fn a_vm_says_whether_a_rollout_replaces_it_and_how_its_creation_goes() {
    use gce_backend_queues::engine::{Ack, Resolution};
    use gce_backend_queues::{Task, WorkerId};
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", created(ctx.now())).await;
    ctx.seed_vm("linux-1", |v| {
        created(v.configured)(v);
        v.attributes.machine_type = "zones/z/machineTypes/older".into();
    })
    .await;
    ctx.seed_vm("linux-2", |_| {}).await;
    // linux-2's insert failed once and waits for its retry.
    ctx.push(&CreateInstance { id: "linux-2".into() }).await.unwrap();
    let q = ctx.queues.get(CreateInstance::QUEUE);
    let worker = WorkerId { group: "test".into(), id: "test".into() };
    let got = q.engine().take(q.spec(), &worker, 10).await.unwrap().tasks;
    let error = "QUOTA_EXCEEDED: no CPUs left".to_owned();
    let retry = Resolution::Retry { after: std::time::Duration::from_secs(30), error: error.clone() };
    let acks: Vec<_> = got
        .iter()
        .map(|l| Ack { id: l.id.clone(), token: l.token.clone(), resolution: retry.clone() })
        .collect();
    q.engine().finish(q.spec(), &acks).await.unwrap();

    let (page, _) =
        list_vms(&ctx, "linux", config(&ctx, "linux").await.as_ref(), None, None, 10).await.unwrap();
    let outdated: Vec<bool> = page.iter().map(|v| v.outdated).collect();
    assert_eq!(outdated, [false, true, false], "made from the Config's attributes or older ones");
    assert_eq!(
        (page[0].work.as_ref(), page[1].work.as_ref()),
        (None, None),
        "created: no creation to follow"
    );
    let w = page[2].work.clone().expect("linux-2 is being made");
    assert_eq!((w.queue.as_str(), w.state.as_str(), w.attempts), ("create_instance", "pending", 1), "{w:?}");
    assert_eq!(w.last_error.as_deref(), Some(error.as_str()));
    // Its next run is the task's own, after it was pushed.
    let status = q.status_by_key("linux-2").await.unwrap().expect("live");
    assert_eq!(w.next_run, status.run_at, "{w:?}");
    assert!(w.next_run.is_some_and(|t| t > status.created), "{w:?}");
    let linux = config(&ctx, "linux").await;
    assert!(vm(&ctx, "linux-1", linux.as_ref()).await.unwrap().0.outdated, "one VM says it too");
    let (two, tasks) = vm(&ctx, "linux-2", linux.as_ref()).await.unwrap();
    assert_eq!(two.work, Some(w));
    assert_eq!(tasks, [status], "its live tasks, read once");
}
