//! Unit tests of `cron/refresh_prices.rs`.

use super::*;

fn down() -> PriceError {
    PriceError::Unreachable("503 UNAVAILABLE: try again".into())
}

#[tokio::test]
async fn the_catalog_is_read_once_a_day_and_kept() {
    let (ctx, fakes) = Ctx::test();
    let t0 = ctx.now();
    assert_eq!(run(&ctx).await.unwrap(), 0);
    let book = ctx.ports.store.price_book().await.unwrap().unwrap();
    assert_eq!((book.source.as_str(), book.read_at, book.unreachable), (CATALOG, t0, None));
    assert_eq!(book.skus.len(), PriceBook::snapshot().unwrap().skus.len());
    fakes.clock.advance(Duration::hours(23));
    run(&ctx).await.unwrap();
    assert_eq!(fakes.prices.calls(), 1, "not read again within a day");
    fakes.clock.advance(Duration::hours(1));
    run(&ctx).await.unwrap();
    assert_eq!(fakes.prices.calls(), 2);
    assert_eq!(ctx.ports.store.price_book().await.unwrap().unwrap().read_at, ctx.now());
}

#[tokio::test]
async fn without_the_catalog_the_snapshot_serves_and_says_so_once() {
    let (ctx, fakes) = Ctx::test();
    fakes.prices.set(Err(down()));
    let t0 = ctx.now();
    run(&ctx).await.unwrap();
    let book = ctx.ports.store.price_book().await.unwrap().unwrap();
    assert_eq!(book.source, "snapshot 2026-12-07");
    let u = book.unreachable.clone().unwrap();
    assert_eq!(
        (u.since, u.error.as_str()),
        (t0, "Cloud Billing Catalog unreachable: 503 UNAVAILABLE: try again")
    );
    // The next runs try again, and change nothing while the failure is the same: no write, no
    // log line (the first failure of an outage is the one said).
    fakes.clock.advance(Duration::hours(1));
    run(&ctx).await.unwrap();
    assert_eq!(fakes.prices.calls(), 2);
    assert!(fallback(Some(book.clone()), &down(), ctx.now()).unwrap().is_none());
    assert_eq!(ctx.ports.store.price_book().await.unwrap().unwrap().unreachable.unwrap().since, t0);
    // Back: the Catalog's, the failure gone.
    fakes.prices.set(Ok(PriceBook::snapshot().unwrap().skus));
    run(&ctx).await.unwrap();
    let book = ctx.ports.store.price_book().await.unwrap().unwrap();
    assert_eq!((book.source.as_str(), book.read_at, book.unreachable), (CATALOG, ctx.now(), None));
}

#[tokio::test]
async fn a_book_from_the_catalog_is_kept_a_week_while_it_cannot_be_read() {
    let (ctx, fakes) = Ctx::test();
    let t0 = ctx.now();
    run(&ctx).await.unwrap();
    fakes.prices.set(Err(PriceError::Refused("403 PERMISSION_DENIED: scope".into())));
    fakes.clock.advance(Duration::days(2));
    run(&ctx).await.unwrap();
    let book = ctx.ports.store.price_book().await.unwrap().unwrap();
    assert_eq!((book.source.as_str(), book.read_at), (CATALOG, t0), "kept");
    assert!(book.unreachable.unwrap().error.contains("403"));
    fakes.clock.advance(Duration::days(5));
    run(&ctx).await.unwrap();
    let book = ctx.ports.store.price_book().await.unwrap().unwrap();
    assert_eq!(book.source, "snapshot 2026-12-07", "a week old: the snapshot instead");
    assert_eq!(book.unreachable.unwrap().since, t0 + Duration::days(2), "the outage's start kept");
}

#[tokio::test]
async fn an_answer_without_a_sku_it_prices_is_a_failure_not_an_empty_book() {
    let (ctx, fakes) = Ctx::test();
    fakes.prices.set(Ok(Vec::new()));
    run(&ctx).await.unwrap();
    let book = ctx.ports.store.price_book().await.unwrap().unwrap();
    assert_eq!(book.source, "snapshot 2026-12-07");
    assert!(book.unreachable.unwrap().error.contains("no SKU"));
}

#[tokio::test]
async fn a_book_that_does_not_decode_is_read_again() {
    let (ctx, fakes) = Ctx::test();
    fakes.store.plant_price_book("{garbage");
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.price_book().await.unwrap().unwrap().from_catalog());
}
