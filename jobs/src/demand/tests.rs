//! Unit tests of `demand.rs`: counting once, shares, a reading's target, and the hold.

use std::collections::BTreeMap;

use super::*;
use crate::Ctx;
use crate::config::Demand;
use crate::model::{Bot, Observed};
use crate::ports::bots::{BotError, BotErrorKind};
use crate::testing::created;
use crate::work::ExpandConfig;

fn tags(t: &[&str]) -> Vec<String> {
    t.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_task_counts_for_the_most_specific_set_it_matches() {
    let counts: BTreeMap<Vec<String>, u32> = [
        (tags(&["pool:ci"]), 10),
        (tags(&["os:Linux", "pool:ci"]), 6),
        (tags(&["gpu:none", "os:Linux", "pool:ci"]), 2),
        (tags(&["pool:try"]), 3),
    ]
    .into();
    let e = exclusive(&counts);
    // pool:ci holds every ci task: 10 less the 6 of Linux (which hold the 2 of gpu:none) ... and
    // the 2 again: under-counted, never twice.
    assert_eq!(e[&tags(&["pool:ci"])], 2);
    assert_eq!(e[&tags(&["os:Linux", "pool:ci"])], 4);
    assert_eq!(e[&tags(&["gpu:none", "os:Linux", "pool:ci"])], 2);
    assert_eq!(e[&tags(&["pool:try"])], 3);
    // Configs sharing one set share its count, the remainder to the first.
    assert_eq!([share(7, 0, 3), share(7, 1, 3), share(7, 2, 3)], [3, 2, 2]);
    assert_eq!(share(5, 0, 1), 5);
}

fn demand(min_idle: u32) -> Demand {
    let dimensions = [("pool".to_owned(), "ci".to_owned())].into();
    Demand { dimensions, min_idle, ..Demand::default() }
}

/// Config `prefix` (bounds 0..=20, then `configure`d) with `vms` connected VMs, the first `busy`
/// of them running a task and the rest idle since `idle_for` ago as the walks saw them, the last
/// one woken from the warm pool `woken` ago if given.
async fn seed_pool(
    ctx: &Ctx,
    (prefix, vms, busy): (&str, u32, u32),
    idle_for: chrono::TimeDelta,
    woken: Option<chrono::TimeDelta>,
    configure: impl FnOnce(&mut crate::config::Config),
) {
    ctx.seed_config_with(prefix, vms, |c| {
        c.amount.min = 0;
        c.amount.max = 20;
        configure(c);
    })
    .await;
    let now = ctx.now();
    for i in 0..vms {
        let vm = ctx
            .seed_vm(&format!("{prefix}-{i}"), |v| {
                created(now)(v);
                v.connected = Some(now);
                v.woken = woken.filter(|_| i + 1 == vms).map(|w| now - w);
            })
            .await;
        let task_id = if i < busy { format!("t{i}") } else { String::new() };
        let bot = Bot { id: vm.hostname.clone(), task_id, ..Bot::default() };
        let idle_since = (i >= busy).then(|| now - idle_for);
        let seen = Observed { unknown: Default::default(), bot, at: now, idle_since };
        ctx.ports.store.put_bots(&[seen]).await.unwrap();
    }
}

/// A demand-driven Config `prefix` (bounds 0..=20) with `vms` connected VMs, the first `busy` of
/// them running a task and the rest idle since `idle_for` ago.
async fn pool(ctx: &Ctx, prefix: &str, vms: u32, busy: u32, idle_for: chrono::TimeDelta) {
    seed_pool(ctx, (prefix, vms, busy), idle_for, None, |c| c.demand = Some(demand(1))).await;
}

#[tokio::test]
async fn a_reading_sets_the_target_and_expands_at_once() {
    let (ctx, fakes) = Ctx::test();
    pool(&ctx, "ci", 3, 2, chrono::TimeDelta::seconds(30)).await;
    *fakes.bots.pending.lock().unwrap() = vec![tags(&["pool:ci", "os:Linux"]); 5];
    assert_eq!(read(&ctx, "https://swarm.example.com").await.unwrap(), 1);
    let rec = ctx.ports.store.config("ci").await.unwrap().unwrap().value;
    let d = rec.demand.clone().expect("read");
    assert_eq!(
        (d.pending, d.busy, d.idle, d.live, d.target),
        (5, 2, 1, 3, 8),
        "busy 2 + pending 5 + min_idle 1"
    );
    assert_eq!(rec.amount_at(ctx.now()), 8);
    assert_eq!(ctx.taken::<ExpandConfig>().await, [ExpandConfig { prefix: "ci".into() }]);
    // One count for the set, not one per VM.
    assert_eq!(fakes.bots.calls(), ["count_pending pool:ci"]);
}

#[tokio::test]
async fn it_shrinks_only_by_bots_idle_past_the_timeout() {
    let (ctx, fakes) = Ctx::test();
    // Six VMs, none busy, no work: min_idle 1 wants 1, but they idled 30 s of 10 minutes.
    pool(&ctx, "ci", 6, 0, chrono::TimeDelta::seconds(30)).await;
    read(&ctx, "https://swarm.example.com").await.unwrap();
    let d = ctx.ports.store.config("ci").await.unwrap().unwrap().value.demand.unwrap();
    assert_eq!(d.target, 6, "{}", d.why);
    assert!(ctx.taken::<ExpandConfig>().await.is_empty(), "no change, no expansion");
    // Ten minutes later (a walk saw them again, still idle) they are idle for long: down to
    // min_idle.
    fakes.clock.advance(chrono::TimeDelta::minutes(10));
    let seen: Vec<Observed> = ctx
        .ports
        .store
        .bots(&(0..6).map(|i| format!("ci-{i}-abcd")).collect::<Vec<_>>())
        .await
        .unwrap()
        .into_iter()
        .map(|o| Observed { at: ctx.now(), ..o.unwrap() })
        .collect();
    ctx.ports.store.put_bots(&seen).await.unwrap();
    read(&ctx, "https://swarm.example.com").await.unwrap();
    let d = ctx.ports.store.config("ci").await.unwrap().unwrap().value.demand.unwrap();
    assert_eq!((d.idle_long, d.target), (6, 1), "{}", d.why);
}

#[tokio::test]
async fn swarming_down_holds_the_target_and_says_why() {
    let (ctx, fakes) = Ctx::test();
    pool(&ctx, "ci", 4, 4, chrono::TimeDelta::seconds(0)).await;
    read(&ctx, "https://swarm.example.com").await.unwrap();
    assert_eq!(ctx.ports.store.config("ci").await.unwrap().unwrap().value.demand.unwrap().target, 5);
    ctx.taken::<ExpandConfig>().await;
    // Swarming goes down and the bots finish their tasks: nothing shrinks.
    *fakes.bots.fail.lock().unwrap() = Some(BotError::new(BotErrorKind::Unavailable, "no answer"));
    fakes.clock.advance(chrono::TimeDelta::hours(1));
    read(&ctx, "https://swarm.example.com").await.unwrap();
    let rec = ctx.ports.store.config("ci").await.unwrap().unwrap().value;
    let d = rec.demand.clone().unwrap();
    assert_eq!((d.target, d.held.is_some()), (5, true), "{}", d.why);
    assert_eq!(rec.amount_at(ctx.now()), 5);
    let errors = ctx.ports.store.errors("ci").await.unwrap();
    assert!(errors[0].code == "demand_unread" && errors[0].message.contains("target held"), "{errors:?}");
    assert!(ctx.taken::<ExpandConfig>().await.is_empty());
}

#[tokio::test]
async fn a_walk_that_failed_shrinks_nothing() {
    let (ctx, fakes) = Ctx::test();
    pool(&ctx, "ci", 4, 0, chrono::TimeDelta::minutes(30)).await;
    // Idle for half an hour, as of the last walk; the walks fail from then on.
    fakes.clock.advance(chrono::TimeDelta::minutes(10));
    read(&ctx, "https://swarm.example.com").await.unwrap();
    let d = ctx.ports.store.config("ci").await.unwrap().unwrap().value.demand.unwrap();
    assert_eq!((d.idle, d.idle_long, d.target), (4, 0, 4), "{}", d.why);
}

async fn state(ctx: &Ctx, prefix: &str) -> crate::model::demand_reading::DemandState {
    ctx.ports.store.config(prefix).await.unwrap().unwrap().value.demand.unwrap()
}

#[tokio::test]
async fn a_set_under_one_that_cannot_be_read_is_held_too() {
    let (ctx, fakes) = Ctx::test();
    pool(&ctx, "ci", 2, 2, chrono::TimeDelta::seconds(0)).await;
    ctx.seed_config_with("cilinux", 1, |c| {
        c.amount.min = 0;
        c.amount.max = 20;
        let dimensions = [("pool".to_owned(), "ci".to_owned()), ("os".to_owned(), "Linux".to_owned())].into();
        c.demand = Some(Demand { dimensions, ..Demand::default() });
    })
    .await;
    *fakes.bots.pending.lock().unwrap() = vec![tags(&["pool:ci", "os:Linux"]); 4];
    read(&ctx, "https://swarm.example.com").await.unwrap();
    assert_eq!(
        (state(&ctx, "ci").await.pending, state(&ctx, "cilinux").await.pending),
        (0, 4),
        "counted once, where most specific"
    );
    // Only the specific set's count fails: ci would count those 4 tasks as its own; it holds.
    *fakes.bots.fail_tags.lock().unwrap() = Some(tags(&["os:Linux", "pool:ci"]));
    read(&ctx, "https://swarm.example.com").await.unwrap();
    let (a, b) = (state(&ctx, "ci").await, state(&ctx, "cilinux").await);
    assert!(a.held.is_some() && b.held.is_some(), "{} / {}", a.why, b.why);
    assert_eq!(a.pending, 0, "{}", a.why);
    assert!(a.why.contains("more specific dimension set os:Linux,pool:ci"), "{}", a.why);
}

/// Warm-pool Config `prefix` (bounds 0..=20, min_idle 0, idle_timeout 60 s, two kept suspended)
/// with `vms` connected VMs, every bot idle since `idle_for` ago as the walks saw it, the last
/// one woken from the warm pool `woken` ago if given.
async fn warm_pool(
    ctx: &Ctx,
    prefix: &str,
    vms: u32,
    idle_for: chrono::TimeDelta,
    woken: Option<chrono::TimeDelta>,
) {
    seed_pool(ctx, (prefix, vms, 0), idle_for, woken, |c| {
        let idle_timeout = crate::config::Secs(60);
        c.demand = Some(Demand { idle_timeout, ..demand(0) });
        c.warm = Some(crate::config::Warm { suspended: 2, ..Default::default() });
    })
    .await;
}

#[tokio::test]
async fn a_bot_woken_from_the_warm_pool_is_idle_since_its_wake() {
    let (ctx, _) = Ctx::test();
    // Idle for ten minutes as the walks saw them; ci-2 was parked meanwhile and woken 10 s ago.
    let ago = chrono::TimeDelta::seconds(10);
    warm_pool(&ctx, "ci", 3, chrono::TimeDelta::minutes(10), Some(ago)).await;
    read(&ctx, "https://swarm.example.com").await.unwrap();
    let d = state(&ctx, "ci").await;
    // Two idle past the timeout go; the one just woken stays.
    assert_eq!((d.idle, d.idle_long, d.target), (3, 2, 1), "{}", d.why);
}

#[tokio::test]
async fn a_warm_pool_lets_go_the_bots_it_had_to_spare_for_the_timeout() {
    let (ctx, fakes) = Ctx::test();
    // Four bots idle 30 s of 60: none long, all kept...
    warm_pool(&ctx, "ci", 4, chrono::TimeDelta::seconds(30), None).await;
    read(&ctx, "https://swarm.example.com").await.unwrap();
    assert_eq!(state(&ctx, "ci").await.target, 4);
    // ... then tasks hopped between them (each ran one, 20 s ago), but all four were idle at
    // every reading for a minute: all go (min_idle 0).
    for _ in 0..6 {
        fakes.clock.advance(chrono::TimeDelta::seconds(10));
        let now = ctx.now();
        let ids: Vec<String> = (0..4).map(|i| format!("ci-{i}-abcd")).collect();
        let seen: Vec<Observed> = ctx
            .ports
            .store
            .bots(&ids)
            .await
            .unwrap()
            .into_iter()
            .map(|o| Observed {
                at: now,
                idle_since: Some(now - chrono::TimeDelta::seconds(20)),
                ..o.unwrap()
            })
            .collect();
        ctx.ports.store.put_bots(&seen).await.unwrap();
        read(&ctx, "https://swarm.example.com").await.unwrap();
    }
    let d = state(&ctx, "ci").await;
    assert_eq!((d.idle_long, d.target), (0, 0), "{}", d.why);
    assert!(d.why.contains("4 idle together"), "{}", d.why);
}
