//! How the service's listeners (the API's, `--metrics-listen`) treat their clients: the
//! `[http]` settings, and the request rates they enforce, in this process's memory.
//!
//! The server itself (header read and idle timeouts, the connection cap) is the shared one of
//! `gce_backend_sim::listener`. Rates are token buckets (the rule of
//! [`gce_backend_jobs::ports::rated::Bucket`]): one per bearer token presented (kept as a hash,
//! never the secret), one per client address (an IPv6 address by its /64) for everything but
//! health checks and `register`, which draw from their own per address: a flood of calls
//! from an address leaves its probes answered, and `register`, which takes no token, gets a
//! stricter rate. Over a rate: 429 with `Retry-After`, counted in
//! `http_throttled_total{listener,by}`, logged once a minute per kind. At most [`MAX_KEYS`]
//! buckets are kept: past it the full ones go, then all (a flood of new keys can only reset
//! buckets, never grow memory).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gce_backend_jobs::config::Secs;
use gce_backend_jobs::ports::rated::{Bucket, Rate};
use gce_backend_queues::metrics::Labels;
use gce_backend_sim::listener::Limits;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::summary::Summary;

/// Buckets kept at most (about 100 bytes each).
pub const MAX_KEYS: usize = 65_536;

/// `[http]`: what every listener of the service allows a client.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Http {
    /// A request's head must arrive within this of the connection waiting for it (opened, or
    /// its previous answer sent), else the connection is closed: a silent, trickling or idle
    /// keep-alive connection lasts this long. 1 s to 10 minutes.
    pub header_read_timeout: Secs,
    /// A connection on which no byte moves either way for this long is closed (a client that
    /// stopped sending its body or reading its answer). 1 s to 1 hour; above 30 s, the
    /// longest a call may take.
    pub idle_timeout: Secs,
    /// Connections each listener serves at once; more wait unaccepted. 1 to 65 536.
    pub max_connections: usize,
    /// Requests per bearer token presented.
    pub per_token: Rate,
    /// Requests per client address (health checks and `register` have their own buckets).
    pub per_address: Rate,
    /// `register` calls per client address.
    pub register_per_address: Rate,
}

impl Default for Http {
    fn default() -> Self {
        let d = Limits::DEFAULT;
        Http {
            header_read_timeout: Secs(d.header_read_timeout_ms / 1000),
            idle_timeout: Secs(d.idle_timeout_ms / 1000),
            max_connections: d.max_connections,
            per_token: Rate { rate: 50.0, burst: 500 },
            per_address: Rate { rate: 100.0, burst: 1000 },
            register_per_address: Rate { rate: 2.0, burst: 20 },
        }
    }
}

impl Http {
    /// The server's limits.
    pub fn limits(&self) -> Limits {
        Limits {
            header_read_timeout_ms: self.header_read_timeout.0.saturating_mul(1000),
            idle_timeout_ms: self.idle_timeout.0.saturating_mul(1000),
            max_connections: self.max_connections,
        }
    }

    /// Checks the ranges; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        self.limits().validate().map_err(|e| format!("http.{e}"))?;
        for (key, r) in [
            ("per_token", self.per_token),
            ("per_address", self.per_address),
            ("register_per_address", self.register_per_address),
        ] {
            r.validate().map_err(|e| format!("http.{key}: {e}"))?;
        }
        Ok(())
    }
}

/// Which bucket refused a request (the `by` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum By {
    Token,
    Address,
    Health,
    Register,
}

impl By {
    fn label(self) -> &'static str {
        match self {
            By::Token => "token",
            By::Address => "address",
            By::Health => "health",
            By::Register => "register",
        }
    }

    fn what(self) -> &'static str {
        match self {
            By::Token => "with this token",
            By::Address => "from this address",
            By::Health => "of health checks from this address",
            By::Register => "to register from this address",
        }
    }
}

/// A bucket's key: a token's hash, or a class of requests from an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Token([u8; 16]),
    Address(By, IpAddr),
}

/// The rates of one listener.
#[derive(Debug)]
pub struct Throttle {
    listener: &'static str,
    http: Http,
    register: Option<String>,
    buckets: Mutex<HashMap<Key, Bucket>>,
    throttled: Family<Labels, Counter>,
    log: Arc<Summary>,
}

impl Throttle {
    /// The rates of `http` on `listener` (the label: `api`, `metrics`), refusals counted in
    /// `throttled`; `register` is the path of the `register` method, if the listener serves it.
    pub fn new(
        listener: &'static str,
        http: &Http,
        register: Option<String>,
        throttled: Family<Labels, Counter>,
    ) -> Self {
        let log = Summary::new(format!("{listener} listener: requests throttled"));
        Throttle { listener, http: http.clone(), register, buckets: Mutex::default(), throttled, log }
    }

    fn rate(&self, key: &Key) -> Rate {
        match key {
            Key::Token(_) => self.http.per_token,
            Key::Address(By::Register, _) => self.http.register_per_address,
            Key::Address(..) => self.http.per_address,
        }
    }

    /// Takes a token of `key`'s bucket at `now_ms`: `None` when taken (or no limit), else how
    /// long until one is there.
    fn take(&self, key: Key, now_ms: u64) -> Option<Duration> {
        let rate = self.rate(&key);
        if rate.rate <= 0.0 {
            return None;
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_KEYS && !buckets.contains_key(&key) {
            // A full bucket is no different from none.
            buckets.retain(|k, b| {
                let r = self.rate(k);
                b.tokens + r.rate * now_ms.saturating_sub(b.at_ms) as f64 / 1000.0 < f64::from(r.burst)
            });
            if buckets.len() >= MAX_KEYS {
                buckets.clear();
            }
        }
        let (b, wait) = Bucket::step(buckets.get(&key).copied(), now_ms, rate, false);
        buckets.insert(key, b);
        (!wait.is_zero()).then_some(wait)
    }

    /// The bucket that refuses `req` now, and how long until it would not.
    fn check(&self, req: &Request) -> Option<(By, Duration)> {
        let path = req.uri().path();
        let class = match path {
            "/healthz" | "/readyz" => By::Health,
            p if self.register.as_deref() == Some(p) => By::Register,
            _ => By::Address,
        };
        let now = now_ms();
        if let Some(ConnectInfo(addr)) = req.extensions().get::<ConnectInfo<SocketAddr>>()
            && let Some(wait) = self.take(Key::Address(class, client(addr)), now)
        {
            return Some((class, wait));
        }
        if class == By::Address
            && let Some(token) = super::auth::bearer(req.headers())
        {
            let digest = Sha256::digest(token.as_bytes());
            let mut key = [0u8; 16];
            key.copy_from_slice(&digest[..16]);
            if let Some(wait) = self.take(Key::Token(key), now) {
                return Some((By::Token, wait));
            }
        }
        None
    }

    /// 429 with `Retry-After` (whole seconds, at least 1), counted and logged.
    fn refuse(&self, by: By, wait: Duration, req: &Request) -> Response {
        let labels = vec![("listener", self.listener.to_owned()), ("by", by.label().to_owned())];
        self.throttled.get_or_create(&labels).inc();
        let from = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        self.log.note(by.label(), tracing::Level::WARN, || {
            from.map(|a| format!(" (first from {a})")).unwrap_or_default()
        });
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        let message = format!("too many requests {}: try again in {secs}s", by.what());
        let mut res = ApiError::new(StatusCode::TOO_MANY_REQUESTS, message).into_response();
        res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        res
    }
}

/// The address a client is limited by: its IPv4 address, or its IPv6 /64 (one host's share).
fn client(addr: &SocketAddr) -> IpAddr {
    match addr.ip().to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
        v4 => v4,
    }
}

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Middleware: refuses a request over a rate with 429, else passes it on.
pub async fn limit(State(t): State<Arc<Throttle>>, req: Request, next: Next) -> Response {
    match t.check(&req) {
        Some((by, wait)) => t.refuse(by, wait, &req),
        None => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle(http: Http) -> Throttle {
        Throttle::new("api", &http, Some("/register".into()), Family::default())
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
    fn a_flood_of_new_keys_never_holds_more_than_max_keys() {
        let t = throttle(Http { per_token: Rate { rate: 1.0, burst: 2 }, ..Http::default() });
        let drained = Key::Token([0xff; 16]);
        t.take(drained, 0);
        t.take(drained, 0);
        for i in 0..(MAX_KEYS as u32 * 2) {
            let mut k = [0u8; 16];
            k[..4].copy_from_slice(&i.to_be_bytes());
            t.take(Key::Token(k), 0);
            assert!(t.buckets.lock().unwrap().len() <= MAX_KEYS);
        }
        // Later, the full buckets go first when room is needed.
        let mut k = [0u8; 16];
        k[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        t.take(Key::Token(k), 10_000);
        assert!(t.buckets.lock().unwrap().len() < MAX_KEYS / 2, "the refilled ones were dropped");
    }

    #[test]
    fn ipv6_clients_are_limited_by_their_64_and_mapped_ipv4_as_ipv4() {
        let a: SocketAddr = "[2001:db8:1:2:aaaa::1]:5".parse().unwrap();
        let b: SocketAddr = "[2001:db8:1:2:bbbb::9]:6".parse().unwrap();
        let c: SocketAddr = "[2001:db8:1:3::1]:6".parse().unwrap();
        assert_eq!(client(&a), client(&b));
        assert_ne!(client(&a), client(&c));
        let mapped: SocketAddr = "[::ffff:10.0.0.7]:1".parse().unwrap();
        assert_eq!(client(&mapped), "10.0.0.7".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn the_shipped_settings_state_the_defaults() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/service.toml");
        let shipped = crate::settings::Settings::load(Some(&path)).unwrap();
        assert_eq!(shipped.http, Http::default());
    }

    #[test]
    fn the_settings_are_checked_and_name_the_key() {
        Http::default().validate().unwrap();
        let bad = Http { header_read_timeout: Secs(0), ..Http::default() };
        assert!(bad.validate().unwrap_err().starts_with("http.header_read_timeout"));
        let bad = Http { register_per_address: Rate { rate: -1.0, burst: 1 }, ..Http::default() };
        assert!(bad.validate().unwrap_err().starts_with("http.register_per_address"));
        let bad = Http { max_connections: 0, ..Http::default() };
        assert!(bad.validate().unwrap_err().starts_with("http.max_connections"));
    }
}
