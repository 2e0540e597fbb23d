//! Bearer tokens: how they are kept (SHA-256 hashes in a TOML secrets file or environment
//! variable, each with an optional expiry), the set in force (swapped whole when the file is read
//! again), the roles they carry, and the one rule for who may read or change a Config.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use gce_backend_jobs::config::Config;
use gce_backend_jobs::model::FileError;
use gce_backend_jobs::ports::clock::Clock;
use rand::Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;

/// What a token may do: reader, writer and admin each include the ones before; `metrics` stands
/// beside them (`/metrics` only, which admin also may read). [`Role::grants`] is the rule.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// No token at all: the methods a VM calls with its own proof (never a token's role: a
    /// tokens file naming it is refused).
    #[value(skip)]
    Anyone,
    /// Read `ROOT/metrics` and nothing else (for a scraper that comes through the API's port).
    Metrics,
    /// Read Configs (of its groups, or without owner), VMs and queues.
    Reader,
    /// Also change the Configs its groups own, recycle their VMs, retry dead tasks.
    Writer,
    /// Everything: every Config, global pause, queue purges.
    Admin,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Anyone => "anyone",
            Role::Metrics => "metrics",
            Role::Reader => "reader",
            Role::Writer => "writer",
            Role::Admin => "admin",
        })
    }
}

impl Role {
    /// Whether a token of this role may call what needs `need`.
    pub fn grants(self, need: Role) -> bool {
        match need {
            Role::Anyone => true,
            Role::Metrics => matches!(self, Role::Metrics | Role::Admin),
            _ => self != Role::Metrics && self >= need,
        }
    }
}

/// One token as stored: never the token itself, only its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// Who holds it (shown in logs and records).
    pub name: String,
    /// Lower-case hex SHA-256 of the token.
    pub sha256: String,
    /// Its role.
    pub role: Role,
    /// Its groups, matched against a Config's `owner`.
    #[serde(default)]
    pub groups: Vec<String>,
    /// When it stops being accepted (RFC 3339 with an offset, as a string or a TOML date-time);
    /// never without.
    #[serde(default, deserialize_with = "rfc3339", skip_serializing_if = "Option::is_none")]
    pub expires: Option<DateTime<Utc>>,
}

/// `expires`: an RFC 3339 time with an offset, quoted or as a TOML date-time.
fn rfc3339<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum When {
        Text(String),
        Toml(toml::value::Datetime),
    }
    let text = match When::deserialize(d)? {
        When::Text(t) => t,
        When::Toml(t) => t.to_string(),
    };
    DateTime::parse_from_rfc3339(&text).map(|t| Some(t.to_utc())).map_err(|e| {
        serde::de::Error::custom(format!(
            "expires {text:?}: {e} (an RFC 3339 time with an offset, e.g. 2027-01-31T00:00:00Z)"
        ))
    })
}

/// The secrets file: `[[token]]` tables.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenFile {
    /// The tokens.
    #[serde(default)]
    pub token: Vec<TokenEntry>,
}

/// The tokens the API accepts.
#[derive(Debug, Clone, Default)]
pub struct Tokens(Vec<Held>);

/// One accepted token: its hash, who it stands for, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    hash: [u8; 32],
    caller: Caller,
    expires: Option<DateTime<Utc>>,
}

/// Why a presented token is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No token of that hash.
    #[error("unknown token")]
    Unknown,
    /// Known, but past its expiry.
    #[error("token {name:?} expired at {}", at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))]
    Expired {
        /// The token's name.
        name: String,
        /// Its expiry.
        at: DateTime<Utc>,
    },
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// Its groups.
    pub groups: Vec<String>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Tokens {
    /// Parses the TOML secrets text (`[[token]]` tables with name, sha256, role, groups,
    /// expires). Errors name `origin`, the line and the rule, never a value of the file.
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        let file: TokenFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(0, |s| text[..s.start.min(text.len())].lines().count().max(1));
            format!("{origin}: line {line}: {}", e.message())
        })?;
        let mut out = Tokens::default();
        for t in file.token {
            let hash = decode_hex(&t.sha256)
                .ok_or_else(|| format!("{origin}: token {:?}: sha256 must be 64 hex digits", t.name))?;
            if t.role == Role::Anyone {
                return Err(format!(
                    "{origin}: token {:?}: role must be metrics, reader, writer or admin",
                    t.name
                ));
            }
            if out.0.iter().any(|h| h.hash == hash || h.caller.name == t.name) {
                return Err(format!("{origin}: token {:?} is listed twice (same name or hash)", t.name));
            }
            let caller = Caller { name: t.name, role: t.role, groups: t.groups };
            out.0.push(Held { hash, caller, expires: t.expires });
        }
        Ok(out)
    }

    /// One token (for the embedded default, which makes an admin token per run).
    pub fn single(token: &str, caller: Caller) -> Self {
        Tokens(vec![Held { hash: digest(token), caller, expires: None }])
    }

    /// True when no token is configured (every authenticated call then answers 401).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The caller a presented token stands for at `now` (hashes compared in constant time).
    pub fn check(&self, token: &str, now: DateTime<Utc>) -> Result<&Caller, Refusal> {
        let d = digest(token);
        let mut found = None;
        for h in &self.0 {
            if bool::from(h.hash.ct_eq(&d)) {
                found = Some(h);
            }
        }
        let held = found.ok_or(Refusal::Unknown)?;
        match held.expires {
            Some(at) if at <= now => Err(Refusal::Expired { name: held.caller.name.clone(), at }),
            _ => Ok(&held.caller),
        }
    }

    /// What `new` changes, by token name.
    pub fn changes(&self, new: &Tokens) -> Changes {
        let by_name = |t: &Tokens| -> BTreeMap<String, Held> {
            t.0.iter().map(|h| (h.caller.name.clone(), h.clone())).collect()
        };
        let (old, new) = (by_name(self), by_name(new));
        let mut c = Changes::default();
        for (name, h) in &new {
            match old.get(name) {
                None => c.added.push(name.clone()),
                Some(o) if o != h => c.changed.push(name.clone()),
                Some(_) => {}
            }
        }
        c.removed = old.keys().filter(|n| !new.contains_key(*n)).cloned().collect();
        c
    }
}

/// What a reload changed: token names (never a secret or a hash), each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Tokens that were not there.
    pub added: Vec<String>,
    /// Tokens no longer there.
    pub removed: Vec<String>,
    /// Tokens whose hash, role, groups or expiry changed.
    pub changed: Vec<String>,
}

/// The tokens in force, shared by every route: swapped whole when the tokens file is read again
/// (a call sees the old set or the new one, never a mix).
#[derive(Debug, Clone, Default)]
pub struct LiveTokens(Arc<RwLock<Arc<Tokens>>>);

impl From<Tokens> for LiveTokens {
    fn from(t: Tokens) -> Self {
        LiveTokens(Arc::new(RwLock::new(Arc::new(t))))
    }
}

impl LiveTokens {
    /// The set in force now.
    pub fn current(&self) -> Arc<Tokens> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the set with `text` parsed (from `origin`) and says what changed; a text that
    /// does not parse changes nothing (the error names `origin` and the rule, never a value).
    pub fn reload(&self, text: &str, origin: &str) -> Result<Changes, String> {
        let new = Tokens::parse(text, origin)?;
        let mut slot = self.0.write().unwrap_or_else(|e| e.into_inner());
        let changes = slot.changes(&new);
        *slot = Arc::new(new);
        Ok(changes)
    }
}

fn decode_hex(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The lower-case hex SHA-256 of a token, as the tokens file keeps it.
pub fn hash(token: &str) -> String {
    digest(token).iter().map(|b| format!("{b:02x}")).collect()
}

/// A new random token and the entry that stores it.
pub fn new_token(name: &str, role: Role, groups: Vec<String>) -> (String, TokenEntry) {
    let bytes: [u8; 24] = rand::rng().random();
    let token = format!("gbt_{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>());
    let sha256 = hash(&token);
    (token, TokenEntry { name: name.to_owned(), sha256, role, groups, expires: None })
}

impl Caller {
    /// May read `config`: admins always; readers and writers when it has no owner or they
    /// share a group (a metrics token never).
    pub fn may_read(&self, config: &Config) -> bool {
        self.may_read_owned(&config.owner)
    }

    /// [`Caller::may_read`] of a Config owned by `owner` (the owner an audit entry keeps once
    /// its Config is gone).
    pub fn may_read_owned(&self, owner: &[String]) -> bool {
        self.role == Role::Admin
            || (self.role.grants(Role::Reader) && (owner.is_empty() || self.in_owner(owner)))
    }

    /// May read a Config file's entry (its errors, a held deletion): admins always; others when
    /// the Config it names is known and theirs to read (a file that could not be read that far
    /// is shown to admins only: its text may be anyone's).
    pub fn may_read_file(&self, file: &FileError) -> bool {
        self.role == Role::Admin || file.owner.as_ref().is_some_and(|o| self.may_read_owned(o))
    }

    /// May change `config`: admins always; writers in one of its owner groups (a Config without
    /// owner is changed by admins only, as in LUCI).
    pub fn may_write(&self, config: &Config) -> bool {
        self.role == Role::Admin || (self.role >= Role::Writer && self.in_owner(&config.owner))
    }

    /// Shares a group with `owner` (a Config's owner groups).
    fn in_owner(&self, owner: &[String]) -> bool {
        owner.iter().any(|o| self.groups.contains(o))
    }
}

/// The minimum role of a route, checked after authentication.
#[derive(Debug, Clone, Copy)]
pub struct Needs(pub Role);

/// What [`require`] checks against: the tokens in force, the clock their expiry is read on, and
/// the route's role.
pub type Gate = (LiveTokens, Arc<dyn Clock>, Needs);

/// A request's bearer token as the listener's rates checked it (against the same tokens in
/// force, on the same clock), left in the request so [`require`] does not check it again.
#[derive(Debug, Clone)]
pub struct Checked(pub Result<Caller, Refusal>);

/// The bearer token a request presents (`Authorization: Bearer …`), if any.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
}

/// Authenticates the bearer token (or takes the listener's [`Checked`] outcome) and checks the
/// route's role: 401 without a valid token (or with an expired one, named), 403 with a role
/// that does not grant the route's. The caller is left in the request's extensions.
pub async fn require(State((tokens, clock, needs)): State<Gate>, mut req: Request, next: Next) -> Response {
    if needs.0 == Role::Anyone {
        return next.run(req).await;
    }
    let checked = req.extensions_mut().remove::<Checked>();
    let Some(token) = bearer(req.headers()) else {
        return ApiError::new(
            axum::http::StatusCode::UNAUTHORIZED,
            "a bearer token is required (Authorization: Bearer …)",
        )
        .into_response();
    };
    let checked = match checked {
        Some(Checked(checked)) => checked,
        None => tokens.current().check(token, clock.now()).cloned(),
    };
    let caller = match checked {
        Ok(c) => c,
        Err(refused) => {
            return ApiError::new(axum::http::StatusCode::UNAUTHORIZED, refused.to_string()).into_response();
        }
    };
    if !caller.role.grants(needs.0) {
        return ApiError::forbidden(format!(
            "this method needs the {} role; token {:?} has {}",
            needs.0, caller.name, caller.role
        ))
        .into_response();
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

#[cfg(test)]
mod tests;
