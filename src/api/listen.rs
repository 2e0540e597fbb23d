//! How the service's listeners (the API's, `--metrics-listen`) limit their clients' request
//! rates, in this process's memory. Their `[http]` settings are [`crate::settings::Http`]; the
//! server itself (header read and idle timeouts, the connection caps) is the shared one of
//! `gce_backend_listener`, which tells [`Throttle::reporter`] of the connections it closes.
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
use gce_backend_jobs::ports::buckets::{Bucket, Rate};
use gce_backend_jobs::ports::clock::Clock;
use gce_backend_listener::{Refused, client};
use gce_backend_queues::metrics::Labels;
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
        // Each way this listener can throttle reads zero until it does.
        let token = tokens.as_ref().map(|_| By::Token);
        let register_by = register.as_ref().map(|_| By::Register);
        for by in [Some(By::Address), Some(By::Health), Some(By::Connections), token, register_by]
            .into_iter()
            .flatten()
        {
            let _ = throttled
                .get_or_create(&vec![("listener", listener.to_owned()), ("by", by.label().to_owned())]);
        }
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
mod tests;
