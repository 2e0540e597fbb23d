//! Unit tests of `tasks/inspect_swarming.rs`.

use chrono::Duration as D;

use super::*;
use crate::model::Bot;
use crate::testing::created;

const SERVER: &str = "https://swarm.example.com";

fn bot(id: &str, at: chrono::DateTime<chrono::Utc>) -> Bot {
    Bot { id: id.into(), first_seen: Some(at), last_seen: Some(at), ..Bot::default() }
}

/// One walk; the VMs it pushed to manage_bot (their tasks finished, so the next push of
/// the same VM makes a new task).
async fn walk(ctx: &Ctx) -> Vec<String> {
    run(ctx, InspectSwarming { server: SERVER.into() }).await.unwrap();
    let mut ids: Vec<String> = ctx.finished::<ManageBot>().await.into_iter().map(|t| t.id).collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_vm_is_pushed_when_its_bot_changes_and_not_on_every_walk() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    let a = ctx.seed_vm("linux-0", created(ctx.now())).await;
    let b = ctx.seed_vm("linux-1", created(ctx.now())).await;
    f.bots.bots.lock().unwrap().insert(a.hostname.clone(), bot(&a.hostname, ctx.now()));
    assert_eq!(walk(&ctx).await, ["linux-0"], "a new bot: looked at");
    assert!(ctx.ports.store.bot(&a.hostname).await.unwrap().is_some(), "observed");

    // Nothing changed but its last contact: no task.
    f.clock.advance(D::seconds(60));
    f.bots.bots.lock().unwrap().insert(a.hostname.clone(), bot(&a.hostname, ctx.now()));
    f.bots.bots.lock().unwrap().get_mut(&a.hostname).unwrap().first_seen = Some(ctx.now() - D::seconds(60));
    assert!(walk(&ctx).await.is_empty(), "an idle fleet costs no task");

    // linux-1's bot connects, linux-0's dies: both looked at, once.
    f.clock.advance(D::seconds(60));
    f.bots.bots.lock().unwrap().insert(b.hostname.clone(), bot(&b.hostname, ctx.now()));
    f.bots.bots.lock().unwrap().get_mut(&a.hostname).unwrap().is_dead = true;
    assert_eq!(walk(&ctx).await, ["linux-0", "linux-1"]);
    f.clock.advance(D::seconds(60));
    assert!(walk(&ctx).await.is_empty(), "still dead is no news");
}

#[tokio::test]
async fn a_bot_gone_silent_or_no_longer_listed_is_looked_at_once() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    let a = ctx.seed_vm("linux-0", created(ctx.now())).await;
    let b = ctx.seed_vm("linux-1", created(ctx.now())).await;
    for vm in [&a, &b] {
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
    }
    walk(&ctx).await;
    // linux-0 stops calling Swarming (its last contact stays); linux-1's bot is deleted from
    // Swarming (no longer listed).
    f.bots.bots.lock().unwrap().get_mut(&b.hostname).unwrap().deleted = true;
    f.clock.advance(ctx.silent_after() + D::seconds(1));
    assert_eq!(walk(&ctx).await, ["linux-0", "linux-1"]);
    assert!(ctx.ports.store.bot(&b.hostname).await.unwrap().is_none(), "its observation is dropped");
    f.clock.advance(D::seconds(60));
    assert!(walk(&ctx).await.is_empty(), "once");
}
