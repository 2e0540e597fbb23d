//! Unit tests of `status.rs`.

use super::*;
use crate::backoff::Scope;
use crate::ctx::Ctx;
use crate::model::Pause;

async fn of(ctx: &Ctx, prefix: &str) -> ConfigStatus {
    status(&*ctx.store, prefix, ctx.now(), chrono::Duration::zero(), false).await.unwrap()
}

#[tokio::test]
async fn the_pause_in_force_is_the_configs_own_else_the_global_one() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    ctx.seed_config_with("mac", 1, |_| {}).await;
    assert_eq!(of(&ctx, "linux").await.pause_in_force, None);
    let all =
        Pause { unknown: Default::default(), by: "sre".into(), reason: "maintenance".into(), at: ctx.now() };
    ctx.store.set_global_pause(Some(&all)).await.unwrap();
    let own =
        Pause { unknown: Default::default(), by: "team".into(), reason: "image bad".into(), at: ctx.now() };
    crate::writes::update_config(&ctx, "mac", |r| {
        r.paused = Some(own.clone());
        Ok::<_, TaskError>(true)
    })
    .await
    .unwrap();
    let (linux, mac) = (of(&ctx, "linux").await, of(&ctx, "mac").await);
    assert_eq!((linux.pause_in_force, linux.paused_all), (Some(all.clone()), true));
    assert_eq!(mac.pause_in_force, Some(own), "its own pause wins");
    ctx.store.set_global_pause(None).await.unwrap();
    assert_eq!(of(&ctx, "linux").await.pause_in_force, None);
}

#[tokio::test]
async fn a_multi_zone_configs_backoff_is_its_first_zone_that_backs_off() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config_with("linux", 2, |c| *c = crate::testing::zoned(c.clone(), &[("a", 1), ("b", 1)])).await;
    assert!(of(&ctx, "linux").await.backoff.is_none());
    crate::backoff::hit(&ctx, &Scope("test-project".into(), "b".into()), "ZONE_RESOURCE_POOL_EXHAUSTED")
        .await
        .unwrap();
    let st = of(&ctx, "linux").await;
    let b = st.backoff.expect("zone b backs off");
    assert_eq!(Some(&b), st.zones[1].backoff.as_ref());
    assert!(st.zones[0].backoff.is_none());
}
