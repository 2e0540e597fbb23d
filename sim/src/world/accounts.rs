//! The simulator's service account: the access tokens it issued (from its metadata server or
//! its OAuth token endpoint), each with its scopes and expiry on the world's clock (the caller
//! passes the time), and every Compute, Swarming and Billing call's standing with respect to its
//! token, counted per API, per token and per Swarming server; whether a standing refuses the call,
//! under the settings (`auth.rs`). A record of the world's; it does not import the world.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use tokio::time::Instant;

use crate::auth::{ACCOUNT_EMAIL, Api, AuthSettings, Standing};
use crate::keys::{ACCOUNT_KEY, ACCOUNT_KID, verify};

/// Tokens remembered: beyond it, expired ones are forgotten (a call with one is then `invalid`).
const KEEP_TOKENS: usize = 10_000;

/// Where a token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The metadata server (`/computeMetadata/v1/instance/service-accounts/default/token`).
    Metadata,
    /// The OAuth token endpoint, for a key file's signed assertion.
    KeyFile,
}

/// A token issued.
#[derive(Debug, Clone)]
struct Issued {
    source: Source,
    scopes: Vec<String>,
    issued: Instant,
    expires: Instant,
    calls: BTreeMap<Api, u64>,
    late: u64,
}

/// What a token saw, as `GET /sim/auth` reports it (the token itself is not shown).
#[derive(Debug, Clone, Serialize)]
pub struct TokenReport {
    /// The order it was issued in (1 is the first).
    pub n: u64,
    /// Where it came from.
    pub source: Source,
    /// Its scopes.
    pub scopes: Vec<String>,
    /// When it was issued and when it expires (ms on the simulator's clock).
    pub issued_ms: u64,
    /// See `issued_ms`.
    pub expires_ms: u64,
    /// Calls that carried it while it was current, by API.
    pub calls: BTreeMap<Api, u64>,
    /// Calls that carried it after it expired.
    pub late: u64,
}

/// The accounts' state.
#[derive(Debug, Default)]
pub struct Accounts {
    /// Settings in force.
    pub settings: AuthSettings,
    /// The metadata server does not answer (`POST /sim/auth {"metadata": "down"}`): its routes
    /// take a request and never answer it, as a metadata server that has stopped.
    pub metadata_down: bool,
    tokens: HashMap<String, (u64, Issued)>,
    issued: u64,
    /// Token requests answered, by source.
    pub requests: BTreeMap<Source, u64>,
    /// Calls by API and standing.
    pub standings: BTreeMap<Api, BTreeMap<Standing, u64>>,
    /// Swarming calls by server host: (with a token, without one).
    pub servers: BTreeMap<String, (u64, u64)>,
}

/// Random bytes as hex (tokens are not guessable, and not drawn from the world's seeded
/// generator, so a run's faults do not depend on how many tokens were issued).
fn random_hex() -> String {
    let mut b = [0u8; 24];
    // The system's generator does not fail on the platforms the simulator runs on; a zeroed
    // token would still be unique through its sequence number.
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Accounts {
    /// No token issued yet, under `settings`.
    pub fn new(settings: AuthSettings) -> Self {
        Self { settings, ..Self::default() }
    }

    /// Issues at `now` an access token with `scopes` from `source`; returns it and its
    /// lifetime (s).
    pub fn issue(&mut self, source: Source, scopes: Vec<String>, now: Instant) -> (String, u64) {
        let ttl = self.settings.token_ttl_s;
        let a = self;
        if a.tokens.len() >= KEEP_TOKENS {
            a.tokens.retain(|_, (_, t)| t.expires > now);
        }
        a.issued += 1;
        let token = format!("ya29.sim{}{}", a.issued, random_hex());
        let issued = Issued {
            source,
            scopes,
            issued: now,
            expires: now + std::time::Duration::from_secs(ttl),
            calls: BTreeMap::new(),
            late: 0,
        };
        a.tokens.insert(token.clone(), (a.issued, issued));
        *a.requests.entry(source).or_default() += 1;
        (token, ttl)
    }

    /// Counts a call to `api` (of Swarming server `server`) with `authorization` (the header's
    /// value) at `now` (`now_s`: Unix seconds) and returns its standing; a call refused for it
    /// is refused by the caller.
    pub fn authenticate(
        &mut self,
        api: Api,
        server: Option<&str>,
        authorization: Option<&str>,
        (now, now_s): (Instant, i64),
    ) -> Standing {
        let a = self;
        if let Some(host) = server {
            let e = a.servers.entry(host.to_owned()).or_default();
            if authorization.is_some() { e.0 += 1 } else { e.1 += 1 }
        }
        let standing = match authorization.map(|h| h.strip_prefix("Bearer ")) {
            None => Standing::Missing,
            Some(None) => Standing::Invalid,
            Some(Some(token)) => match a.tokens.get_mut(token) {
                Some((_, t)) if t.expires <= now => {
                    t.late += 1;
                    Standing::Expired
                }
                Some((_, t)) => {
                    *t.calls.entry(api).or_default() += 1;
                    if api.takes(&t.scopes) { Standing::Current } else { Standing::Scope }
                }
                // Google's APIs (Compute, Billing) take a self-signed JWT of the account's key;
                // LUCI's servers do not (tokeninfo knows only Google's tokens).
                None => match verify(token, ACCOUNT_KID, ACCOUNT_KEY) {
                    Ok(c) if api != Api::Swarming && c["iss"] == ACCOUNT_EMAIL => {
                        let scopes: Vec<String> =
                            c["scope"].as_str().unwrap_or("").split(' ').map(str::to_owned).collect();
                        match c["exp"].as_i64() {
                            Some(exp) if exp > now_s => {
                                if api.takes(&scopes) {
                                    Standing::Current
                                } else {
                                    Standing::Scope
                                }
                            }
                            _ => Standing::Expired,
                        }
                    }
                    _ => Standing::Invalid,
                },
            },
        };
        *a.standings.entry(api).or_default().entry(standing).or_default() += 1;
        standing
    }

    /// Whether a call of `standing` to `api` (of `server`) is refused under the settings.
    pub fn refuses(&self, api: Api, server: Option<&str>, standing: Standing) -> bool {
        let s = &self.settings;
        let anonymous = api == Api::Swarming
            && standing == Standing::Missing
            && server.is_some_and(|h| s.anonymous_swarming.iter().any(|x| x == h));
        s.require_auth && standing != Standing::Current && !anonymous
    }

    /// The tokens issued, in order; `clock_ms` puts an instant on the simulator's clock.
    pub fn reports(&self, clock_ms: impl Fn(Instant) -> u64) -> Vec<TokenReport> {
        let mut v: Vec<TokenReport> = self
            .tokens
            .values()
            .map(|(n, t)| TokenReport {
                n: *n,
                source: t.source,
                scopes: t.scopes.clone(),
                issued_ms: clock_ms(t.issued),
                expires_ms: clock_ms(t.expires),
                calls: t.calls.clone(),
                late: t.late,
            })
            .collect();
        v.sort_by_key(|t| t.n);
        v
    }
}
