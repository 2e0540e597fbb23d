//! Unit tests of `tasks/delete_stale_bots.rs`.

use super::*;

#[tokio::test]
async fn marked_bots_without_a_vm_are_deleted_after_the_grace_only_on_their_server() {
    let (ctx, f) = Ctx::test();
    let now = ctx.now();
    let server = "https://swarm.example.com";
    for key in [
        format!("{server}|linux-3-gone"),
        format!("{server}|linux-0-abcd"),
        "https://other|mac-1-x".to_owned(),
    ] {
        ctx.ports.store.mark(STALE_BOTS, &key, now).await.unwrap();
    }
    ctx.seed_vm("linux-0", |_| {}).await; // linux-0-abcd has a VM again
    run(&ctx, DeleteStaleBots { server: server.into() }).await.unwrap();
    assert!(f.bots.calls().is_empty(), "not before the grace");
    f.clock.advance(ctx.settings.timing.stale_bot_grace.chrono() + chrono::Duration::seconds(1));
    run(&ctx, DeleteStaleBots { server: server.into() }).await.unwrap();
    assert_eq!(f.bots.calls(), ["delete linux-3-gone"], "the one with a VM is kept");
    let left: Vec<String> =
        ctx.ports.store.marks(STALE_BOTS).await.unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(left, ["https://other|mac-1-x"], "the other server's mark waits for its own task");
}
