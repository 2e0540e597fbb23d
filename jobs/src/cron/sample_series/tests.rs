//! Unit tests of `cron/sample_series.rs`.

use super::*;
use crate::model::KEEP_SAMPLES;
use chrono::DurationRound;

#[tokio::test]
async fn one_sample_a_minute_per_config_and_queue_the_last_hour_kept() {
    let (ctx, fakes) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    let now = ctx.now();
    let connected = |v: &mut crate::model::Vm| {
        crate::testing::created(now)(v);
        v.connected = Some(now);
    };
    ctx.seed_vm("linux-0", connected).await;
    let linux = Series::Config("linux".into());
    let create = Series::Queue("create_instance".into());

    // Twice in one minute (a tick run twice): one sample, the second's.
    run(&ctx).await.unwrap();
    ctx.seed_vm("linux-1", connected).await;
    fakes.clock.advance(chrono::Duration::seconds(20));
    run(&ctx).await.unwrap();
    for name in QUEUES {
        let c = ctx.queues.get(name).counts().await.unwrap();
        assert_eq!(c.pending + c.delayed + c.running, 0, "pushes no task: {name} {c:?}");
    }
    let got = ctx.ports.store.samples(&linux).await.unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].get(config::AMOUNT), got[0].get(config::CONNECTED)), (3, 2), "{got:?}");
    assert_eq!(got[0].at, ctx.now().duration_trunc(chrono::Duration::minutes(1)).unwrap());
    assert_eq!(ctx.ports.store.samples(&create).await.unwrap().len(), 1, "every queue too");

    // Seventy minutes later: the newest sixty, oldest first.
    for _ in 0..70 {
        fakes.clock.advance(chrono::Duration::minutes(1));
        run(&ctx).await.unwrap();
    }
    let got = ctx.ports.store.samples(&linux).await.unwrap();
    assert_eq!(got.len(), KEEP_SAMPLES);
    assert!(got.windows(2).all(|w| w[1].at - w[0].at == chrono::Duration::minutes(1)), "{got:?}");
    assert_eq!(got.last().unwrap().at, ctx.now().duration_trunc(chrono::Duration::minutes(1)).unwrap());
    assert_eq!(ctx.ports.store.samples(&create).await.unwrap().len(), KEEP_SAMPLES);

    // A Config's status dropped drops its series.
    ctx.ports.store.drop_status("linux").await.unwrap();
    assert!(ctx.ports.store.samples(&linux).await.unwrap().is_empty());
}
