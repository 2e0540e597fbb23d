//! Metering as VM records are written: what a write opens and closes, and that a write that
//! loses its race counts nothing.

use chrono::Duration;

use super::*;
use crate::ctx::Ctx;
use crate::model::parked::{Park, Parked};
use crate::records::writes::update_vm;
use crate::testing::created;
use crate::{model::ledger::Billed, model::ledger::ledger};

async fn seeded(ctx: &Ctx) {
    ctx.seed_vm("linux-0", |v| {
        v.attributes.zone = "us-central1-b".into();
        v.attributes.machine_type = "zones/us-central1-b/machineTypes/e2-standard-4".into();
    })
    .await;
}

async fn read(ctx: &Ctx) -> crate::model::ledger::Ledger {
    ledger(&ctx.ports.store.ledger("linux").await.unwrap(), ctx.now())
}

#[tokio::test]
async fn a_vm_is_metered_from_its_instance_through_suspend_to_its_deletion() {
    let (ctx, fakes) = Ctx::test();
    seeded(&ctx).await;
    let rates = ctx.catalog.rates(ctx.ports.store.as_ref(), ctx.now()).await.unwrap();

    // No instance yet: nothing billed, nothing in the ledger.
    update_vm(&ctx, "linux-0", |v| {
        v.insert_sent = Some(ctx.now());
        true
    })
    .await
    .unwrap();
    assert_eq!(ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value.meter, None);
    assert!(ctx.ports.store.ledger("linux").await.unwrap().is_empty());

    let now = ctx.now();
    let vm = update_vm(&ctx, "linux-0", |v| {
        created(now)(v);
        true
    })
    .await
    .unwrap()
    .unwrap();
    let m = vm.meter.clone().expect("metered once its instance is made");
    assert_eq!((m.state, m.since), (Billed::Running, now));
    let running = rate(&rates, &vm, Billed::Running);
    assert!(running > 100_000, "e2-standard-4 and 10 GiB cost more than $0.10/h: {running}");
    assert_eq!(m.rate, running);

    // A write that changes nothing it is billed as keeps the meter.
    fakes.clock.advance(Duration::hours(2));
    let vm = update_vm(&ctx, "linux-0", |v| {
        v.connected = Some(v.configured);
        true
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(vm.meter, Some(m.clone()));

    // Suspended: two running hours closed, the suspended ones open.
    let at = ctx.now();
    update_vm(&ctx, "linux-0", |v| {
        v.parked = Some(Parked {
            how: Park::Suspend,
            since: at,
            done: true,
            waking: None,
            operation: String::new(),
            turns: 0,
            unknown: Default::default(),
        });
        true
    })
    .await
    .unwrap();
    fakes.clock.advance(Duration::hours(3));
    let l = read(&ctx).await;
    let month = l.month("2026-11");
    assert!((month[&Billed::Running].hours - 2.0).abs() < 1e-9, "{l:?}");
    assert!((month[&Billed::Running].usd - 2.0 * running as f64 / 1e6).abs() < 1e-5, "{l:?}");
    assert!((month[&Billed::Suspended].hours - 3.0).abs() < 1e-9, "{l:?}");
    let suspended = rate(&rates, &vm, Billed::Suspended);
    assert!(suspended < running / 4, "suspended {suspended} vs running {running}");
    assert!((l.per_hour() - suspended as f64 / 1e6).abs() < 1e-9);

    // Deleted: closed, nothing open, nothing accrues after.
    let cur = ctx.ports.store.vm("linux-0").await.unwrap().unwrap();
    assert!(delete(&ctx, &cur).await.unwrap());
    let closed = read(&ctx).await;
    assert_eq!(closed.per_hour(), 0.0);
    fakes.clock.advance(Duration::days(2));
    assert_eq!(read(&ctx).await.month("2026-11"), closed.month("2026-11"));
}

#[tokio::test]
async fn a_write_that_loses_its_race_counts_nothing() {
    let (ctx, fakes) = Ctx::test();
    seeded(&ctx).await;
    let now = ctx.now();
    let cur = ctx.ports.store.vm("linux-0").await.unwrap().unwrap();
    let mut first = cur.value.clone();
    created(now)(&mut first);
    assert!(put(&ctx, None, &mut first, Expect::Version(cur.version)).await.unwrap());
    let book = ctx.ports.store.ledger("linux").await.unwrap();
    // A second writer read the same version: its write is refused, the ledger as it was.
    fakes.clock.advance(Duration::minutes(5));
    let mut second = cur.value.clone();
    created(ctx.now())(&mut second);
    assert!(!put(&ctx, None, &mut second, Expect::Version(cur.version)).await.unwrap());
    assert_eq!(ctx.ports.store.ledger("linux").await.unwrap(), book);
    // And a late delete at the old version too.
    assert!(!delete(&ctx, &cur).await.unwrap());
    assert_eq!(ctx.ports.store.ledger("linux").await.unwrap(), book);
    assert_eq!(read(&ctx).await.vms[&Billed::Running], 1);
}
