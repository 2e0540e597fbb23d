//! Unit tests of `status.rs`.

use super::*;
use crate::ctx::Ctx;
use crate::model::Pause;
use crate::placement::backoff::Scope;

async fn of(ctx: &Ctx, prefix: &str) -> ConfigStatus {
    status(&*ctx.ports.store, prefix, ctx.now(), chrono::Duration::zero(), false).await.unwrap()
}

#[tokio::test]
async fn the_pause_in_force_is_the_configs_own_else_the_global_one() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    ctx.seed_config_with("mac", 1, |_| {}).await;
    assert_eq!(of(&ctx, "linux").await.pause_in_force, None);
    let all =
        Pause { unknown: Default::default(), by: "sre".into(), reason: "maintenance".into(), at: ctx.now() };
    ctx.ports.store.set_global_pause(Some(&all)).await.unwrap();
    let own =
        Pause { unknown: Default::default(), by: "team".into(), reason: "image bad".into(), at: ctx.now() };
    crate::records::writes::update_config(&ctx, "mac", |r| {
        r.paused = Some(own.clone());
        Ok::<_, TaskError>(true)
    })
    .await
    .unwrap();
    let (linux, mac) = (of(&ctx, "linux").await, of(&ctx, "mac").await);
    assert_eq!((linux.pause_in_force, linux.paused_all), (Some(all.clone()), true));
    assert_eq!(mac.pause_in_force, Some(own), "its own pause wins");
    ctx.ports.store.set_global_pause(None).await.unwrap();
    assert_eq!(of(&ctx, "linux").await.pause_in_force, None);
}

#[tokio::test]
async fn a_multi_zone_configs_backoff_is_its_first_zone_that_backs_off() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config_with("linux", 2, |c| *c = crate::testing::zoned(c.clone(), &[("a", 1), ("b", 1)])).await;
    assert!(of(&ctx, "linux").await.backoff.is_none());
    crate::placement::backoff::hit(
        &ctx,
        &Scope("test-project".into(), "b".into()),
        "ZONE_RESOURCE_POOL_EXHAUSTED",
    )
    .await
    .unwrap();
    let st = of(&ctx, "linux").await;
    let b = st.backoff.expect("zone b backs off");
    assert_eq!(Some(&b), st.zones[1].backoff.as_ref());
    assert!(st.zones[0].backoff.is_none());
}

#[tokio::test]
async fn each_error_says_whether_it_is_resolved_and_an_older_entry_reads_as_not_resolved() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    ctx.record("linux", "create_instance", "503", "first", "", "").await.unwrap();
    ctx.record("linux", "destroy_instance", "503", "second", "", "").await.unwrap();
    ctx.resolved("linux", &["create_instance"]).await.unwrap();
    let st = of(&ctx, "linux").await;
    let marks: Vec<(&str, bool)> =
        st.errors.iter().map(|e| (e.stage.as_str(), e.resolved.is_some())).collect();
    assert_eq!(marks, [("destroy_instance", false), ("create_instance", true)], "newest first");
    // The API's answer carries it: a resolved error says when, an open one has no `resolved`.
    let answer = serde_json::to_value(&st).unwrap();
    assert_eq!(answer["errors"][0].get("resolved"), None);
    assert_eq!(answer["errors"][1]["resolved"], serde_json::json!(st.errors[1].resolved));
    // An entry another build wrote without `resolved` (and with a field this one does not know)
    // reads as not resolved, and is written back whole.
    let older = serde_json::json!({"time": "2026-01-01T00:00:00Z", "stage": "create_instance", "code": "503",
        "message": "m", "zone": "", "operation": "", "cause": {"retries": 4}});
    let e: crate::model::ErrorEntry = serde_json::from_value(older.clone()).unwrap();
    assert_eq!(e.resolved, None);
    assert_eq!(serde_json::to_value(&e).unwrap(), older);
}
