//! Unit tests of `cron/inspect_instances.rs`.

use super::*;

#[tokio::test]
async fn every_zone_of_a_multi_zone_config_is_scanned() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config_with("linux", 1, |c| *c = crate::testing::zoned(c.clone(), &[("a", 1), ("b", 1)])).await;
    assert_eq!(run(&ctx).await.unwrap(), 2);
    assert_eq!(ctx.keys::<InspectInstances>().await, ["test-project/a", "test-project/b"]);
}
