//! Unit tests of `api/listen.rs`.

use axum::body::Body;
use chrono::TimeZone;
use gce_backend_jobs::ports::clock::ManualClock;

use super::super::auth::{Caller, Role, Tokens};
use super::*;

const TOKEN: &str = "gbt_valid";

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::at(chrono::Utc.with_ymd_and_hms(2026, 11, 21, 10, 0, 0).unwrap()))
}

/// The API listener's rates of `http`, accepting [`TOKEN`], on `clock`.
fn api(http: Http, clock: &Arc<ManualClock>) -> Throttle {
    let caller = Caller { name: "alice".into(), role: Role::Reader, groups: Vec::new() };
    let tokens = LiveTokens::from(Tokens::single(TOKEN, caller));
    Throttle::new("api", &http, Some("/register".into()), Some(tokens), clock.clone(), Family::default())
}

fn throttle(http: Http) -> Throttle {
    api(http, &clock())
}

#[test]
fn a_refused_request_with_a_body_says_its_connection_closes() {
    let t = throttle(Http::default());
    let with_body =
        Request::builder().uri("/x").header("content-length", "5").body(Body::from("hello")).unwrap();
    let res = t.refuse(By::Register, Duration::from_secs(1), &with_body);
    assert_eq!(res.headers().get(header::CONNECTION).map(|v| v.to_str().unwrap()), Some("close"));
    let without = Request::builder().uri("/x").body(Body::empty()).unwrap();
    let res = t.refuse(By::Address, Duration::from_secs(1), &without);
    assert!(res.headers().get(header::CONNECTION).is_none(), "a GET keeps its connection");
}

/// A request for `path` from `from`, with `token` as its bearer.
fn request(path: &str, from: &str, token: Option<&str>) -> Request {
    let mut b = Request::builder().uri(path);
    if let Some(t) = token {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let addr: SocketAddr = from.parse().unwrap();
    b.extension(ConnectInfo(addr)).body(Body::empty()).unwrap()
}

/// Buckets kept for tokens.
fn token_keys(t: &Throttle) -> usize {
    t.table.lock().unwrap().map.keys().filter(|k| matches!(k, Key::Token(_))).count()
}

#[test]
fn a_bucket_refuses_past_its_burst_until_it_fills_again() {
    let t = throttle(Http { per_token: Rate { rate: 2.0, burst: 3 }, ..Http::default() });
    let key = Key::Token([1; 16]);
    for _ in 0..3 {
        assert_eq!(t.take(key, 1_000), None);
    }
    assert_eq!(t.take(key, 1_000), Some(Duration::from_millis(500)));
    assert_eq!(t.take(Key::Token([2; 16]), 1_000), None, "another token has its own");
    assert_eq!(t.take(key, 1_500), None, "half a second: one more");
    let off = throttle(Http { per_token: Rate { rate: 0.0, burst: 1 }, ..Http::default() });
    assert!((0..10_000).all(|_| off.take(key, 0).is_none()), "rate 0: no limit");
}

#[test]
fn only_a_valid_token_gets_a_bucket_and_the_gate_gets_the_check() {
    let clock = clock();
    let t = api(Http { per_token: Rate { rate: 1.0, burst: 2 }, ..Http::default() }, &clock);
    // Unknown tokens, each new or the same again: their address's bucket only.
    for i in 0..100 {
        let mut req = request("/api/x", "10.0.0.1:5", Some(&format!("guess-{}", i % 3)));
        assert_eq!(t.check(&mut req), None, "an unknown token is not throttled as a token");
        let checked = req.extensions().get::<Checked>().expect("left for the gate");
        assert!(checked.0.is_err());
    }
    assert_eq!(token_keys(&t), 0, "no bucket for a token that does not authenticate");
    // The valid one: its own bucket, from any address.
    for from in ["10.0.0.1:5", "10.0.0.2:6"] {
        let mut req = request("/api/x", from, Some(TOKEN));
        assert_eq!(t.check(&mut req), None);
        let checked = req.extensions().get::<Checked>().unwrap();
        assert_eq!(checked.0.as_ref().unwrap().name, "alice");
    }
    let (by, wait) = t.check(&mut request("/api/x", "10.0.0.3:7", Some(TOKEN))).unwrap();
    assert_eq!((by, wait), (By::Token, Duration::from_secs(1)));
    assert_eq!(token_keys(&t), 1);
    // The clock the throttle reads is the one tests move: a second, one more.
    clock.advance(chrono::Duration::seconds(1));
    assert_eq!(t.check(&mut request("/api/x", "10.0.0.3:7", Some(TOKEN))), None);
}

#[test]
fn the_metrics_listener_limits_by_address_only() {
    let http = Http {
        per_token: Rate { rate: 1.0, burst: 1 },
        per_address: Rate { rate: 1.0, burst: 3 },
        ..Http::default()
    };
    let t = Throttle::new("metrics", &http, None, None, clock(), Family::default());
    for _ in 0..3 {
        let mut req = request("/metrics", "10.0.0.1:5", Some(TOKEN));
        assert_eq!(t.check(&mut req), None, "a bearer header is not a token here");
        assert!(req.extensions().get::<Checked>().is_none());
    }
    let (by, _) = t.check(&mut request("/metrics", "10.0.0.1:5", Some(TOKEN))).unwrap();
    assert_eq!(by, By::Address);
    assert_eq!(token_keys(&t), 0);
}

/// The `n`th address of a flood (an IPv6 /64 each).
fn flooder(n: u32) -> Key {
    let ip = std::net::Ipv6Addr::new(0x2001, 0xdb8, (n >> 16) as u16, n as u16, 0, 0, 0, 0);
    Key::Address(By::Address, ip.into())
}

#[test]
fn a_flood_of_new_addresses_cannot_reset_a_throttled_one_and_sweeps_seldom() {
    let t = throttle(Http { per_address: Rate { rate: 1.0, burst: 2 }, ..Http::default() });
    let held = Key::Address(By::Address, "10.0.0.1".parse().unwrap());
    t.take(held, 0);
    t.take(held, 0);
    assert!(t.take(held, 0).is_some(), "drained");
    let flood = MAX_KEYS as u32 * 2;
    for i in 0..flood {
        t.take(flooder(i), 0);
    }
    {
        let table = t.table.lock().unwrap();
        assert_eq!(table.map.len(), MAX_KEYS, "never more than MAX_KEYS");
        let bound = 1 + u64::from(flood) / SWEEP_EVERY as u64;
        assert!(table.sweeps <= bound, "{} sweeps for {flood} new keys", table.sweeps);
    }
    assert!(t.take(held, 0).is_some(), "still throttled: the flood reset nothing");
    // The addresses without room share one bucket: the flood holds itself back.
    assert!(t.take(flooder(flood + 1), 0).is_some());
    // Once the flood's buckets are full again, they make room for new keys.
    assert_eq!(t.take(flooder(flood + 2), 10_000), None);
    let table = t.table.lock().unwrap();
    assert!(table.map.len() < MAX_KEYS / 2, "the full buckets were dropped: {}", table.map.len());
}

#[test]
fn a_valid_token_without_room_is_limited_by_its_address() {
    let clock = clock();
    let http = Http {
        per_token: Rate { rate: 1.0, burst: 1 },
        per_address: Rate { rate: 1.0, burst: 2 },
        ..Http::default()
    };
    let t = api(http, &clock);
    let now_ms = clock.now().timestamp_millis() as u64;
    for i in 0..MAX_KEYS as u32 - 1 {
        t.take(flooder(i), now_ms);
    }
    // The last room is its address's; its token finds none.
    for _ in 0..2 {
        assert_eq!(t.check(&mut request("/api/x", "[2001:db9::1]:5", Some(TOKEN))), None);
    }
    assert_eq!(token_keys(&t), 0, "no room: not kept");
    let third = t.check(&mut request("/api/x", "[2001:db9::2]:5", Some(TOKEN)));
    assert_eq!(third.map(|(by, _)| by), Some(By::Address), "its address's rate holds");
}

#[test]
fn a_refused_connection_is_counted_by_connections() {
    let throttled = Family::<Labels, Counter>::default();
    let t = Arc::new(Throttle::new("api", &Http::default(), None, None, clock(), throttled.clone()));
    let report = t.reporter();
    report("10.0.0.1:5".parse().unwrap());
    report("10.0.0.1:6".parse().unwrap());
    let labels = vec![("listener", "api".to_owned()), ("by", "connections".to_owned())];
    assert_eq!(throttled.get_or_create(&labels).get(), 2);
}
