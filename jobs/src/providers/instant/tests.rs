//! The pipeline end to end on a third type of provider ([`Instant`]: no Compute, nothing sent
//! together, no zone scanned), through the handlers and cron jobs as the workers run them: a
//! pool bigger than a bulk is made, its machines recorded one by one, their bots connect, a
//! shrink drains two, whose bots are terminated, machines removed and records forgotten. Compute
//! is never asked and nothing goes by `bulk_insert`: what differs is the provider's to say.

use std::sync::Arc;

use super::*;
use crate::ctx::Ctx;
use crate::model::Bot;
use crate::providers::Providers;
use crate::tasks::{
    create_instance, delete_bot, destroy_instance, drain_vm, expand_config, manage_bot, pool_resources,
    terminate_bot,
};
use crate::work::{
    BulkInsert, CreateInstance, DeleteBot, DestroyInstance, DrainVm, ExpandConfig, InspectInstances,
    ManageBot, PoolResources, TerminateBot,
};

/// VMs of the pool: as many as Compute Engine sends in a bulk.
const N: u32 = 10;

fn id(i: u32) -> String {
    format!("fast-{i}")
}

#[tokio::test]
async fn the_pipeline_runs_end_to_end_on_a_provider_with_no_compute_and_no_bulk() {
    let (mut ctx, f) = Ctx::test();
    ctx.providers = Arc::new(Providers::default().with("instant", Arc::new(Instant)));
    assert!(N >= ctx.settings.limits.bulk_min, "a pool Compute Engine would make in bulk");
    let config = |amount| crate::config::Config {
        provider: "instant".into(),
        ..crate::testing::config("fast", amount)
    };
    crate::operate::apply(&ctx, config(N), "test").await.unwrap();
    let prefix = || ExpandConfig { prefix: "fast".into() };

    // Made: N records, each handed to its own create_instance; no per-pool resource to make.
    expand_config::run(&ctx, prefix()).await.unwrap();
    let mut sent: Vec<String> = ctx.finished::<CreateInstance>().await.into_iter().map(|t| t.id).collect();
    sent.sort();
    let mut all: Vec<String> = (0..N).map(id).collect();
    all.sort();
    assert_eq!(sent, all);
    for t in ctx.finished::<PoolResources>().await {
        assert_eq!(pool_resources::run(&ctx, t).await.unwrap(), Next::Done);
    }
    // The safety net sends them one by one too.
    assert_eq!(crate::cron::create_instances::run(&ctx).await.unwrap(), N as usize);
    assert_eq!(ctx.finished::<CreateInstance>().await.len(), N as usize);
    assert!(ctx.keys::<BulkInsert>().await.is_empty(), "nothing goes together");

    // Created: each machine recorded in one step, its bot then watched.
    for i in 0..N {
        assert_eq!(create_instance::run(&ctx, CreateInstance { id: id(i) }).await.unwrap(), Next::Done);
        let vm = ctx.ports.store.vm(&id(i)).await.unwrap().unwrap().value;
        assert_eq!(vm.url(), Some(url(&vm).as_str()), "{}", vm.id);
    }
    assert_eq!(ctx.keys::<ManageBot>().await.len(), N as usize);
    // No zone of its Configs is scanned.
    assert_eq!(crate::cron::inspect_instances::run(&ctx).await.unwrap(), 0);
    assert!(ctx.keys::<InspectInstances>().await.is_empty());

    // Bots: each machine's connects.
    let now = ctx.now();
    for i in 0..N {
        let hostname = ctx.ports.store.vm(&id(i)).await.unwrap().unwrap().value.hostname;
        let bot = Bot { id: hostname.clone(), first_seen: Some(now), last_seen: Some(now), ..Bot::default() };
        f.bots.bots.lock().unwrap().insert(hostname, bot);
        manage_bot::run(&ctx, ManageBot { id: id(i) }).await.unwrap();
        assert!(ctx.ports.store.vm(&id(i)).await.unwrap().unwrap().value.connected.is_some(), "{}", id(i));
    }
    let counts = crate::records::counts::of_config(&*ctx.ports.store, "fast", N, ctx.now()).await.unwrap();
    assert_eq!((counts.created, counts.connected), (N, N));

    // Drained: the pool shrinks by two; their bots are terminated after their tasks, then their
    // machines removed and their records forgotten.
    crate::operate::apply(&ctx, config(N - 2), "test").await.unwrap();
    expand_config::run(&ctx, prefix()).await.unwrap();
    let drains = ctx.finished::<DrainVm>().await;
    let mut going: Vec<String> = drains.iter().map(|t| t.id.clone()).collect();
    going.sort();
    assert_eq!(going, [id(N - 2), id(N - 1)]);
    for t in drains {
        drain_vm::run(&ctx, t).await.unwrap();
    }
    ctx.finished::<ManageBot>().await;
    for vm in &going {
        manage_bot::run(&ctx, ManageBot { id: vm.clone() }).await.unwrap();
    }
    for t in ctx.finished::<TerminateBot>().await {
        terminate_bot::run(&ctx, t).await.unwrap();
    }
    // Each bot ends after its termination task; once that is seen, its machine goes.
    f.clock.advance(ctx.settings.timing.observation_ttl.chrono() + chrono::Duration::seconds(1));
    for vm in &going {
        let hostname = ctx.ports.store.vm(vm).await.unwrap().unwrap().value.hostname;
        let mut bots = f.bots.bots.lock().unwrap();
        let bot = bots.get_mut(&hostname).unwrap();
        (bot.is_dead, bot.termination_task_id) = (true, format!("terminate-{hostname}"));
    }
    for vm in &going {
        manage_bot::run(&ctx, ManageBot { id: vm.clone() }).await.unwrap();
    }
    let destroys = ctx.finished::<DestroyInstance>().await;
    assert_eq!(destroys.len(), 2);
    for t in destroys {
        assert_eq!(destroy_instance::run(&ctx, t).await.unwrap(), Next::Done);
    }
    for t in ctx.finished::<DeleteBot>().await {
        delete_bot::run(&ctx, t).await.unwrap();
    }

    // Removed: the two records are gone, the others up; Compute was never asked.
    for i in 0..N {
        let vm = ctx.ports.store.vm(&id(i)).await.unwrap();
        assert_eq!(vm.is_some(), i < N - 2, "{}", id(i));
    }
    let counts =
        crate::records::counts::of_config(&*ctx.ports.store, "fast", N - 2, ctx.now()).await.unwrap();
    assert_eq!((counts.vms, counts.connected, counts.draining), (N - 2, N - 2, 0));
    assert!(ctx.keys::<BulkInsert>().await.is_empty(), "nothing went together");
    assert!(f.compute.calls().is_empty(), "Compute was never asked: {:?}", f.compute.calls());
    let terminated: Vec<String> =
        f.bots.calls().into_iter().filter(|c| c.starts_with("terminate ")).collect();
    assert_eq!(terminated.len(), 2, "{terminated:?}");
}
