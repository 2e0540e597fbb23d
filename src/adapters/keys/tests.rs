//! Unit tests of `adapters/keys.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A key server counting its fetches; it fails while `down`.
async fn server(hits: Arc<AtomicUsize>, down: Arc<std::sync::atomic::AtomicBool>) -> String {
    let app = axum::Router::new().route(
        "/certs",
        axum::routing::get(move || {
            let (hits, down) = (hits.clone(), down.clone());
            async move {
                hits.fetch_add(1, Ordering::SeqCst);
                // Slow, as a loaded network is: callers arrive while a fetch runs.
                tokio::time::sleep(Duration::from_millis(200)).await;
                if down.load(Ordering::SeqCst) {
                    return (axum::http::StatusCode::SERVICE_UNAVAILABLE, String::new());
                }
                let jwk = crate::sim::identity::jwk(crate::sim::identity::KEY, "k1").unwrap();
                (axum::http::StatusCode::OK, serde_json::json!({"keys": [jwk]}).to_string())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/certs", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn keys_are_fetched_once_kept_and_asked_again_at_most_once_a_minute() {
    let (hits, down) = (Arc::new(AtomicUsize::new(0)), Arc::new(std::sync::atomic::AtomicBool::new(true)));
    let keys = Arc::new(HttpKeys::new(&server(hits.clone(), down.clone()).await).unwrap());
    // Down at start: one fetch for many callers at once, then none for a minute.
    let tries: Vec<_> = (0..20)
        .map(|_| {
            tokio::spawn({
                let keys = keys.clone();
                async move { keys.keys(true).await }
            })
        })
        .collect();
    for t in tries {
        assert!(t.await.unwrap().is_err());
    }
    assert!(keys.keys(true).await.is_err());
    assert_eq!(hits.load(Ordering::SeqCst), 1, "a failed fetch counts too");
    // Up again, a minute later: fetched once, then kept (an unknown key asks again only a
    // minute after the last fetch).
    down.store(false, Ordering::SeqCst);
    keys.cache().tried = Some(Instant::now() - AGAIN);
    assert_eq!(keys.keys(false).await.unwrap()[0].kid, "k1");
    assert_eq!(keys.keys(true).await.unwrap().len(), 1);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    // Down again after an hour: the keys we had are still used.
    down.store(true, Ordering::SeqCst);
    {
        let mut c = keys.cache();
        (c.tried, c.fetched) = (Some(Instant::now() - KEEP), Some(Instant::now() - KEEP));
    }
    assert_eq!(keys.keys(false).await.unwrap()[0].kid, "k1");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn callers_that_come_while_the_first_fetch_runs_wait_for_it() {
    let (hits, down) = (Arc::new(AtomicUsize::new(0)), Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let keys = Arc::new(HttpKeys::new(&server(hits.clone(), down).await).unwrap());
    let first = tokio::spawn({
        let keys = keys.clone();
        async move { keys.keys(false).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await; // the first one is fetching
    let others: Vec<_> = (0..10)
        .map(|_| {
            let keys = keys.clone();
            tokio::spawn(async move { keys.keys(false).await })
        })
        .collect();
    assert_eq!(first.await.unwrap().unwrap().len(), 1);
    for o in others {
        assert_eq!(o.await.unwrap().unwrap().len(), 1, "got the keys the first one fetched");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_redirect_from_the_certs_url_is_not_followed() {
    let (hits, down) = (Arc::new(AtomicUsize::new(0)), Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let elsewhere = server(hits.clone(), down).await;
    let app = axum::Router::new().fallback(move || {
        let to = elsewhere.clone();
        async move { axum::response::Redirect::temporary(&to) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/certs", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let keys = HttpKeys::new(&url).unwrap();
    assert!(keys.keys(true).await.is_err(), "a redirect is no key set");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the redirect's target was never asked");
}
