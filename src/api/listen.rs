//! How the service's listeners (the API's, `--metrics-listen`) limit their clients' request
//! rates, in this process's memory. Their `[http]` settings are [`crate::settings::Http`]; the
//! server itself (header read and idle timeouts, the connection caps) is the shared one of
//! `gce_backend_sim::listener`, which tells [`Throttle::reporter`] of the connections it closes.
//!
//! Rates are token buckets (the rule of [`Bucket`]), read on the context's clock: one per
//! client address (an IPv6 address by its /64: [`client`]) for everything but health checks and
//! `register`, which draw from their own per address (a flood of calls from an address leaves
//! its probes answered, and `register`, which takes no token, gets a stricter rate); and, on
//! the API's listener, one per valid bearer token. The token is checked here against the tokens
//! in force, once: the outcome is left in the request ([`Checked`]) for the route's gate. An
//! unknown, expired or absent token has no bucket of its own, only its address's; the metrics
//! listener has no tokens, so only addresses. Over a rate: 429 with `Retry-After`, counted in
//! `http_throttled_total{listener,by}`, logged once a minute per kind.
//!
//! At most [`MAX_KEYS`] buckets are kept. A full bucket is the same as none, so when a new key
//! finds no room the full ones are dropped, at most once per [`SWEEP_EVERY`] keys turned away
//! or per second (a flood costs O(1) per request, amortised). When none is full the new key is
//! not kept: a token is then limited by its address only, and an address draws from a bucket
//! per class shared by every address without room. A flood never resets a bucket that is not
//! full, i.e. one that is holding its client back.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gce_backend_jobs::ports::clock::Clock;
use gce_backend_jobs::ports::rated::{Bucket, Rate};
use gce_backend_queues::metrics::Labels;
use gce_backend_sim::listener::{Refused, client};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use sha2::{Digest, Sha256};

use super::auth::{Checked, LiveTokens, bearer};
use super::error::ApiError;
use super::summary::Summary;
use crate::settings::Http;

/// Buckets kept at most (about 100 bytes each).
pub const MAX_KEYS: usize = 65_536;
/// New keys turned away (no room, none full) before the full buckets are looked for again.
pub const SWEEP_EVERY: usize = 1024;
/// Longest between two such looks while keys are turned away (ms).
const SWEEP_MS: u64 = 1000;

/// What a client was throttled by (the `by` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum By {
    Token,
    Address,
    Health,
    Register,
    Connections,
}

impl By {
    fn label(self) -> &'static str {
        match self {
            By::Token => "token",
            By::Address => "address",
            By::Health => "health",
            By::Register => "register",
            By::Connections => "connections",
        }
    }

    fn what(self) -> &'static str {
        match self {
            By::Token => "with this token",
            By::Address => "from this address",
            By::Health => "of health checks from this address",
            By::Register => "to register from this address",
            By::Connections => "connections from this address",
        }
    }
}

/// A bucket's key: a valid token's hash, or a class of requests from an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Token([u8; 16]),
    Address(By, std::net::IpAddr),
}

/// The buckets of one listener, bounded by [`MAX_KEYS`].
#[derive(Debug, Default)]
struct Table {
    map: HashMap<Key, Bucket>,
    /// Per class, the bucket of the addresses that found no room in `map`.
    shared: HashMap<By, Bucket>,
    /// New keys turned away since the last look for full buckets, and when it was (ms).
    turned_away: usize,
    swept_ms: Option<u64>,
    /// Looks for full buckets so far.
    sweeps: u64,
}

/// Whether `b` is full at `now_ms` (no different from no bucket).
fn full(b: &Bucket, rate: Rate, now_ms: u64) -> bool {
    b.tokens + rate.rate * now_ms.saturating_sub(b.at_ms) as f64 / 1000.0 >= f64::from(rate.burst)
}

impl Table {
    /// Whether a new key may be kept: there is room, or dropping the full buckets makes some
    /// (looked for when [`SWEEP_EVERY`] keys were turned away since the last look, or a second
    /// passed; else the key is turned away).
    fn room(&mut self, now_ms: u64, rate: impl Fn(&Key) -> Rate) -> bool {
        if self.map.len() < MAX_KEYS {
            return true;
        }
        let due = self.turned_away >= SWEEP_EVERY
            || self.swept_ms.is_none_or(|at| now_ms.saturating_sub(at) >= SWEEP_MS);
        if due {
            self.map.retain(|k, b| !full(b, rate(k), now_ms));
            (self.turned_away, self.swept_ms) = (0, Some(now_ms));
            self.sweeps += 1;
            if self.map.len() < MAX_KEYS {
                return true;
            }
        }
        self.turned_away += 1;
        false
    }
}

/// The rates of one listener.
#[derive(Debug)]
pub struct Throttle {
    listener: &'static str,
    http: Http,
    register: Option<String>,
    tokens: Option<LiveTokens>,
    clock: Arc<dyn Clock>,
    table: Mutex<Table>,
    throttled: Family<Labels, Counter>,
    log: Arc<Summary>,
}

impl Throttle {
    /// The rates of `http` on `listener` (the label: `api`, `metrics`), read on `clock`,
    /// refusals counted in `throttled`; `register` is the path of the `register` method, if the
    /// listener serves it; `tokens` are the tokens it accepts, if any (only those get a bucket).
    pub fn new(
        listener: &'static str,
        http: &Http,
        register: Option<String>,
        tokens: Option<LiveTokens>,
        clock: Arc<dyn Clock>,
        throttled: Family<Labels, Counter>,
    ) -> Self {
        let log = Summary::new(format!("{listener} listener: throttled"));
        Throttle {
            listener,
            http: http.clone(),
            register,
            tokens,
            clock,
            table: Mutex::default(),
            throttled,
            log,
        }
    }

    fn rate(&self, key: &Key) -> Rate {
        match key {
            Key::Token(_) => self.http.per_token,
            Key::Address(By::Register, _) => self.http.register_per_address,
            Key::Address(..) => self.http.per_address,
        }
    }

    /// Takes a token of `key`'s bucket at `now_ms`: `None` when taken (or no limit, or a token
    /// without room for its bucket), else how long until one is there.
    fn take(&self, key: Key, now_ms: u64) -> Option<Duration> {
        let rate = self.rate(&key);
        if rate.rate <= 0.0 {
            return None;
        }
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let kept = t.map.contains_key(&key) || t.room(now_ms, |k| self.rate(k));
        let wait = match (kept, key) {
            (true, _) => {
                let (b, wait) = Bucket::step(t.map.get(&key).copied(), now_ms, rate, false);
                t.map.insert(key, b);
                wait
            }
            (false, Key::Token(_)) => return None,
            (false, Key::Address(by, _)) => {
                let (b, wait) = Bucket::step(t.shared.get(&by).copied(), now_ms, rate, false);
                t.shared.insert(by, b);
                wait
            }
        };
        (!wait.is_zero()).then_some(wait)
    }

    /// The bucket that refuses `req` now, and how long until it would not. A bearer token is
    /// checked here (when the address allows the request) and the outcome left in `req`.
    fn check(&self, req: &mut Request) -> Option<(By, Duration)> {
        let class = match req.uri().path() {
            "/healthz" | "/readyz" => By::Health,
            p if self.register.as_deref() == Some(p) => By::Register,
            _ => By::Address,
        };
        let now = self.clock.now();
        let now_ms = u64::try_from(now.timestamp_millis()).unwrap_or(0);
        if let Some(ConnectInfo(addr)) = req.extensions().get::<ConnectInfo<SocketAddr>>()
            && let Some(wait) = self.take(Key::Address(class, client(addr.ip())), now_ms)
        {
            return Some((class, wait));
        }
        if class != By::Address {
            return None;
        }
        let tokens = self.tokens.as_ref()?;
        let token = bearer(req.headers())?;
        let checked = tokens.current().check(token, now).cloned();
        let key = checked.is_ok().then(|| {
            let mut key = [0u8; 16];
            key.copy_from_slice(&Sha256::digest(token.as_bytes())[..16]);
            Key::Token(key)
        });
        req.extensions_mut().insert(Checked(checked));
        Some((By::Token, self.take(key?, now_ms)?))
    }

    /// Counts and logs a refusal `by` from `from`.
    fn note(&self, by: By, from: Option<SocketAddr>) {
        let labels = vec![("listener", self.listener.to_owned()), ("by", by.label().to_owned())];
        self.throttled.get_or_create(&labels).inc();
        self.log.note(by.label(), tracing::Level::WARN, || {
            from.map(|a| format!(" (first from {})", a.ip())).unwrap_or_default()
        });
    }

    /// 429 with `Retry-After` (whole seconds, at least 1), counted and logged.
    fn refuse(&self, by: By, wait: Duration, req: &Request) -> Response {
        self.note(by, req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0));
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        let message = format!("too many requests {}: try again in {secs}s", by.what());
        let mut res = ApiError::new(StatusCode::TOO_MANY_REQUESTS, message).into_response();
        res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        // Its body is left unread, so the connection cannot carry another request: say so, or
        // a client would send its next request on a connection about to close.
        let h = req.headers();
        if h.get(header::CONTENT_LENGTH).is_some_and(|v| v != "0")
            || h.contains_key(header::TRANSFER_ENCODING)
        {
            res.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        res
    }

    /// What the server tells of a connection it closed for being over its address's cap:
    /// counted (`by="connections"`) and logged as the throttled requests are.
    pub fn reporter(self: &Arc<Self>) -> Refused {
        let t = self.clone();
        Arc::new(move |addr| t.note(By::Connections, Some(addr)))
    }
}

/// Middleware: refuses a request over a rate with 429, else passes it on.
pub async fn limit(State(t): State<Arc<Throttle>>, mut req: Request, next: Next) -> Response {
    match t.check(&mut req) {
        Some((by, wait)) => t.refuse(by, wait, &req),
        None => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
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
}
