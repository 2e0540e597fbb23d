//! Unit tests of `tasks/count_vms.rs`.

use super::*;
use crate::model::{Fault, FaultKind};
use crate::testing::created;

#[tokio::test]
async fn counts_each_state_and_drops_the_status_of_a_config_with_nothing_left() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 4).await;
    ctx.seed_vm("linux-0", |v| {
        created(ctx.now())(v);
        v.connected = Some(ctx.now());
    })
    .await;
    ctx.seed_vm("linux-1", created(ctx.now())).await;
    ctx.seed_vm("linux-2", |v| {
        created(ctx.now())(v);
        v.connected = Some(ctx.now());
        v.fault = Some(Fault { unknown: Default::default(), kind: FaultKind::BotDead, detail: "x".into(), at: ctx.now() });
    })
    .await;
    ctx.seed_vm("linux-3", |v| v.drained = true).await;
    run(&ctx, CountVms { prefix: "linux".into() }).await.unwrap();
    let c = ctx.ports.store.counts("linux").await.unwrap().unwrap();
    assert_eq!((c.configured, c.created, c.connected, c.draining, c.dead), (4, 3, 1, 1, 1));
    ctx.ports.store
        .push_error(
            "gone",
            &crate::model::ErrorEntry { unknown: Default::default(),
                time: ctx.now(),
                stage: "s".into(),
                code: "c".into(),
                message: "m".into(),
                zone: String::new(),
                operation: String::new(),
                resolved: None,
                vm: None,
            },
        )
        .await
        .unwrap();
    run(&ctx, CountVms { prefix: "gone".into() }).await.unwrap();
    assert!(ctx.ports.store.errors("gone").await.unwrap().is_empty(), "nothing of it is left: status dropped");
}
