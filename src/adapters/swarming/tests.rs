//! Unit tests of `adapters/swarming.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gce_backend_jobs::config::{SwarmingServers, Trust};

use super::*;

/// A local server counting its requests; it answers a bot page, or a redirect to `to`.
async fn server(hits: Arc<AtomicUsize>, to: Option<String>) -> String {
    let app = axum::Router::new().fallback(move || {
        let (hits, to) = (hits.clone(), to.clone());
        async move {
            hits.fetch_add(1, Ordering::SeqCst);
            match to {
                Some(to) => axum::response::Response::builder()
                    .status(307)
                    .header("location", format!("{to}/prpc/swarming.v2.Bots/ListBots"))
                    .body(axum::body::Body::empty())
                    .unwrap(),
                None => axum::response::Response::builder()
                    .header("x-prpc-grpc-code", "0")
                    .body(axum::body::Body::from(r#"{"items": [{"botId": "linux-0-abcd"}]}"#))
                    .unwrap(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn only_listed_servers_are_called_and_redirects_are_not_followed() {
    let (attacker_hits, good_hits, redirect_hits) = Default::default();
    let attacker = server(Arc::clone(&attacker_hits), None).await;
    let good = server(Arc::clone(&good_hits), None).await;
    let redirecting = server(Arc::clone(&redirect_hits), Some(attacker.clone())).await;
    let listed = SwarmingServers { servers: vec![good.clone(), redirecting.clone()] };
    let trust = Arc::new(Trust::new(&listed, &BTreeMap::new()).unwrap());
    let bots = Swarming::new(Some("http://{host}"), trust, None).unwrap();
    let (page, _) = bots.list(&good, None).await.unwrap();
    assert_eq!(page[0].id, "linux-0-abcd");
    assert_eq!(good_hits.load(Ordering::SeqCst), 1);
    let host = attacker.trim_start_matches("http://");
    for server in [attacker.clone(), format!("http://evil.example@{host}/p?q="), format!("{attacker}/")] {
        let e = bots.list(&server, None).await.unwrap_err();
        assert_eq!(e.kind, BotErrorKind::Denied, "{server}: {e}");
    }
    assert!(bots.list(&redirecting, None).await.is_err(), "a redirect is an error, not followed");
    assert_eq!(redirect_hits.load(Ordering::SeqCst), 1);
    assert_eq!(attacker_hits.load(Ordering::SeqCst), 0, "nothing reached the unlisted server");
}

#[test]
fn endpoints_given_on_the_command_line_are_urls_without_users_or_queries() {
    assert!(check_endpoint("--certs-url", "https://www.googleapis.com/oauth2/v3/certs").is_ok());
    for bad in ["ftp://x", "https://u:p@x/certs", "https://x/certs?token=1", "https:///certs", "http://x/a b"]
    {
        assert!(check_endpoint("--certs-url", bad).is_err(), "{bad}");
    }
}

/// Requests a recording layer saw: (accept-encoding, the body's `limit`, content-encoding
/// answered).
type Seen = Arc<std::sync::Mutex<Vec<(String, u64, String)>>>;

#[tokio::test]
async fn list_bots_asks_pages_of_500_and_reads_them_gzipped() {
    crate::adapters::install_crypto();
    let sim = gce_backend_sim::Sim::new(gce_backend_sim::SimConfig {
        bot_connect_ms: 0,
        ..gce_backend_sim::SimConfig::default()
    });
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let app = gce_backend_sim::router(sim).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let record = record.clone();
            async move {
                let accept = req.headers().get("accept-encoding").map(|v| v.to_str().unwrap().to_owned());
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                let limit = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| v["limit"].as_u64());
                let resp =
                    next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await;
                let encoding = resp.headers().get("content-encoding").map(|v| v.to_str().unwrap().to_owned());
                if let Some(limit) = limit {
                    let row = (accept.unwrap_or_default(), limit, encoding.unwrap_or_default());
                    record.lock().unwrap().push(row);
                }
                resp
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let hostnames: Vec<String> = (0..520).map(|i| format!("static-{i}")).collect();
    let added = reqwest::Client::new()
        .post(format!("{base}/sim/machines"))
        .json(&json!({"server": "https://swarm.example.com", "hostnames": hostnames}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 200, "{}", added.text().await.unwrap());
    let listed = SwarmingServers { servers: vec!["https://swarm.example.com".into()] };
    let trust = Arc::new(Trust::new(&listed, &BTreeMap::new()).unwrap());
    let bots = Swarming::new(Some(&format!("{base}/swarming/{{host}}")), trust, None).unwrap();
    let (mut all, mut cursor) = (Vec::new(), None);
    loop {
        let (page, next) = bots.list("https://swarm.example.com", cursor).await.unwrap();
        all.extend(page);
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(all.len(), 520, "every bot, across pages");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (accept, limit, encoding) in &seen {
        assert!(accept.contains("gzip"), "gzip accepted: {seen:?}");
        assert_eq!(*limit, 500, "pages of 500 as LUCI's GCE provider asks");
        assert_eq!(encoding, "gzip", "answers over 1 KiB came compressed: {seen:?}");
    }
}

#[tokio::test]
async fn a_call_answered_503_says_its_status_at_once_not_a_timeout() {
    use gce_backend_jobs::config::Secs;
    use gce_backend_jobs::ports::guard::Isolation;
    use gce_backend_jobs::ports::guarded::GuardedBots;
    crate::adapters::install_crypto();
    let (addr, sim) = gce_backend_sim::spawn(gce_backend_sim::SimConfig::default()).await.unwrap();
    let fault = gce_backend_sim::config::ErrorFault { rate: 1.0, status: 503 };
    sim.with(|w| w.faults.errors.insert("swarming.GetBot".into(), fault));
    let listed = SwarmingServers { servers: vec!["https://swarm.example.com".into()] };
    let trust = Arc::new(Trust::new(&listed, &BTreeMap::new()).unwrap());
    let bots = Swarming::new(Some(&format!("http://{addr}/swarming/{{host}}")), trust, None).unwrap();
    let iso = Isolation { swarming_timeout: Secs(2), ..Isolation::default() };
    let metrics = gce_backend_jobs::metrics::Metrics::default();
    let guarded = GuardedBots::new(Arc::new(bots), &iso, &metrics);
    let e = guarded.get("https://swarm.example.com", "linux-0-abcd").await.unwrap_err();
    assert_eq!(e.kind, BotErrorKind::Unavailable, "{e}");
    assert_eq!(e.message, "code 14: 503 Service Unavailable: Service unavailable");
    let answered = sim.with(|w| w.calls["swarming.GetBot"][&503]);
    assert_eq!(answered, 1, "one call, one answer: Swarming calls are not retried within one");
}
