//! Unit tests of `status/prices.rs`.

use super::*;
use crate::ctx::Ctx;
use crate::model::ConfigState;
use crate::prices::book::CATALOG;

async fn report(ctx: &Ctx) -> crate::fleet::status::Report {
    let grace = chrono::Duration::zero();
    crate::fleet::status::report(
        &*ctx.ports.store,
        &*ctx.ports.buckets,
        &[],
        ctx.now(),
        grace,
        false,
        &ctx.settings.trust,
    )
    .await
    .unwrap()
}

fn config<'a>(r: &'a crate::fleet::status::Report, prefix: &str) -> &'a ConfigStatus {
    r.configs.iter().find(|c| c.prefix == prefix).unwrap()
}

#[tokio::test]
async fn each_config_has_a_price_per_hour_of_a_vm_or_says_why_not() {
    let (ctx, _) = Ctx::test();
    let zone = |z: &'static str| move |c: &mut crate::config::Config| c.attributes.zone = z.into();
    ctx.seed_config_with("linux", 1, zone("us-central1-b")).await;
    ctx.seed_config_with("spot", 1, |c| {
        zone("us-central1-b")(c);
        c.attributes.provisioning_model = "SPOT".into();
    })
    .await;
    ctx.seed_config("nowhere", 1).await; // zone `z`: a region without SKUs
    ctx.seed_config_with("odd", 1, |c| {
        zone("us-central1-b")(c);
        c.attributes.machine_type = "zones/{{.Zone}}/machineTypes/m1-megamem-96".into();
    })
    .await;
    ctx.seed_config_with("imaged", 1, |c| {
        zone("us-central1-b")(c);
        c.attributes.disk[0].size = 0;
    })
    .await;
    let r = report(&ctx).await;
    let (linux, spot) = (config(&r, "linux"), config(&r, "spot"));
    let rates = PriceBook::snapshot().unwrap().rates();
    let e2 = rates.machine_per_hour("e2-small", "us-central1", false).unwrap()
        + rates.disk_per_hour("", 10.0, "us-central1").unwrap();
    assert_eq!((linux.price_per_hour, &linux.unpriced), (Some(Usd(e2)), &None));
    assert!(spot.price_per_hour.unwrap() < linux.price_per_hour.unwrap(), "{spot:?}");
    for (prefix, why) in [("nowhere", " in z"), ("odd", "m1-megamem-96"), ("imaged", "disk 0 has no size")] {
        let c = config(&r, prefix);
        assert_eq!(c.price_per_hour, None, "{prefix}: never free");
        assert!(c.unpriced.as_deref().is_some_and(|u| u.contains(why)), "{prefix}: {:?}", c.unpriced);
    }
    let json = serde_json::to_value(linux).unwrap();
    assert_eq!(json["price_per_hour"].as_f64(), Some(e2));
    assert!(json.get("unpriced").is_none());
}

#[tokio::test]
async fn status_names_the_book_in_force_the_snapshot_until_one_is_stored() {
    let (ctx, fakes) = Ctx::test();
    let p = report(&ctx).await.prices.unwrap();
    assert_eq!((p.source.as_str(), p.unreachable), ("snapshot 2026-12-07", None));
    assert_eq!(p.skus, PriceBook::snapshot().unwrap().skus.len());
    crate::cron::refresh_prices::run(&ctx).await.unwrap();
    let p = report(&ctx).await.prices.unwrap();
    assert_eq!((p.source.as_str(), p.read_at), (CATALOG, ctx.now()));
    fakes.prices.set(Err(crate::ports::prices::PriceError::Unreachable("timeout".into())));
    fakes.clock.advance(chrono::Duration::days(1));
    crate::cron::refresh_prices::run(&ctx).await.unwrap();
    let p = report(&ctx).await.prices.unwrap();
    assert_eq!(p.source, CATALOG, "kept for a week");
    assert!(p.unreachable.unwrap().contains("timeout"));
    assert_eq!(p.unreachable_since, Some(ctx.now()));
}

#[tokio::test]
async fn a_config_without_a_record_has_neither() {
    let (ctx, _) = Ctx::test();
    let mut configs =
        vec![ConfigStatus { prefix: "gone".into(), state: ConfigState::Deleted, ..Default::default() }];
    let book = crate::catalog::price_book(&*ctx.ports.store).await.unwrap();
    fill(&*ctx.ports.store, &book, &book.rates(), &mut configs, ctx.now()).await.unwrap();
    assert_eq!((configs[0].price_per_hour, &configs[0].unpriced), (None, &None));
}
