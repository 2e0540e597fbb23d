//! Unit tests of `env.rs`: errors recorded once per fault.

use crate::ctx::Ctx;
use crate::ports::compute::ComputeError;

#[tokio::test]
async fn the_same_fault_is_recorded_once_whatever_compute_counted() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    let storm =
        |n| ComputeError::answered(503, "Service Unavailable", "backendError", "Internal error.", n).message;
    ctx.record_once("linux", "pool_resources", "503", &storm(4)).await.unwrap();
    ctx.record_once("linux", "pool_resources", "503", &storm(9)).await.unwrap();
    let errors = ctx.ports.store.errors("linux").await.unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].message, storm(4), "the first kept");
    // Another fault is another entry.
    ctx.record_once(
        "linux",
        "pool_resources",
        "503",
        "503 Service Unavailable: other (×1 within this attempt)",
    )
    .await
    .unwrap();
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap().len(), 2);
}
