//! Bearer tokens: how they are kept (SHA-256 hashes in a TOML secrets file or environment
//! variable), the roles they carry, and the one rule for who may read or change a Config.

use std::fmt;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gce_backend_jobs::config::Config;
use rand::Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;

/// What a token may do; each role includes the ones before it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// No token at all: the methods a VM calls with its own proof (never a token's role: a
    /// tokens file naming it is refused).
    #[value(skip)]
    Anyone,
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
            Role::Reader => "reader",
            Role::Writer => "writer",
            Role::Admin => "admin",
        })
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
pub struct Tokens(Vec<([u8; 32], Caller)>);

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
    /// Parses the TOML secrets text (`[[token]]` tables with name, sha256, role, groups).
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        let file: TokenFile = toml::from_str(text).map_err(|e| format!("{origin}: {e}"))?;
        let mut out = Tokens::default();
        for t in file.token {
            let hash = decode_hex(&t.sha256)
                .ok_or_else(|| format!("{origin}: token {:?}: sha256 must be 64 hex digits", t.name))?;
            if t.role == Role::Anyone {
                return Err(format!("{origin}: token {:?}: role must be reader, writer or admin", t.name));
            }
            if out.0.iter().any(|(h, c)| *h == hash || c.name == t.name) {
                return Err(format!("{origin}: token {:?} is listed twice (same name or hash)", t.name));
            }
            out.0.push((hash, Caller { name: t.name, role: t.role, groups: t.groups }));
        }
        Ok(out)
    }

    /// One token (for the embedded default, which makes an admin token per run).
    pub fn single(token: &str, caller: Caller) -> Self {
        Tokens(vec![(digest(token), caller)])
    }

    /// True when no token is configured (every authenticated call then answers 401).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The caller a presented token stands for (hashes compared in constant time).
    pub fn caller(&self, token: &str) -> Option<&Caller> {
        let d = digest(token);
        let mut found = None;
        for (h, c) in &self.0 {
            if bool::from(h.ct_eq(&d)) {
                found = Some(c);
            }
        }
        found
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
    (token, TokenEntry { name: name.to_owned(), sha256, role, groups })
}

impl Caller {
    /// May read `config`: admins always; others when it has no owner or they share a group.
    pub fn may_read(&self, config: &Config) -> bool {
        self.role == Role::Admin || config.owner.is_empty() || self.in_owner(config)
    }

    /// May change `config`: admins always; writers in one of its owner groups (a Config without
    /// owner is changed by admins only, as in LUCI).
    pub fn may_write(&self, config: &Config) -> bool {
        self.role == Role::Admin || (self.role >= Role::Writer && self.in_owner(config))
    }

    fn in_owner(&self, config: &Config) -> bool {
        config.owner.iter().any(|o| self.groups.contains(o))
    }
}

/// The minimum role of a route, checked after authentication.
#[derive(Debug, Clone, Copy)]
pub struct Needs(pub Role);

/// Authenticates the bearer token and checks the route's role: 401 without a valid token, 403
/// with too little a role. The caller is left in the request's extensions.
pub async fn require(
    State((tokens, needs)): State<(std::sync::Arc<Tokens>, Needs)>,
    mut req: Request,
    next: Next,
) -> Response {
    if needs.0 == Role::Anyone {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let Some(token) = presented else {
        return ApiError::new(
            axum::http::StatusCode::UNAUTHORIZED,
            "a bearer token is required (Authorization: Bearer …)",
        )
        .into_response();
    };
    let Some(caller) = tokens.caller(token).cloned() else {
        return ApiError::new(axum::http::StatusCode::UNAUTHORIZED, "unknown token").into_response();
    };
    if caller.role < needs.0 {
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
mod tests {
    use super::*;

    #[test]
    fn tokens_are_kept_hashed_and_found_by_the_token() {
        let (token, entry) = new_token("alice", Role::Writer, vec!["infra".into()]);
        let text = toml::to_string(&TokenFile { token: vec![entry.clone()] }).unwrap();
        assert!(!text.contains(&token), "the file never holds the token");
        let tokens = Tokens::parse(&text, "tokens.toml").unwrap();
        assert_eq!(tokens.caller(&token).map(|c| c.name.as_str()), Some("alice"));
        assert!(tokens.caller("gbt_wrong").is_none());
        let twice = format!("{text}\n{text}");
        assert!(Tokens::parse(&twice, "t").unwrap_err().contains("twice"));
        let bad = text.replace(&entry.sha256, "abc");
        assert!(Tokens::parse(&bad, "t").unwrap_err().contains("64 hex"));
        assert!(Tokens::parse("[[token]]\nname='x'\nsha256='00'\nrole='root'\n", "t").is_err());
        let anyone = text.replace("role = \"writer\"", "role = \"anyone\"");
        assert!(Tokens::parse(&anyone, "t").unwrap_err().contains("reader, writer or admin"), "{anyone}");
    }

    #[test]
    fn owners_decide_who_reads_and_writes_a_config() {
        let mut c = Config { owner: vec!["infra".into()], ..Config::default() };
        let who = |role, g: &[&str]| Caller {
            name: "x".into(),
            role,
            groups: g.iter().map(|s| (*s).into()).collect(),
        };
        assert!(who(Role::Reader, &["infra"]).may_read(&c));
        assert!(!who(Role::Reader, &["web"]).may_read(&c));
        assert!(!who(Role::Reader, &["infra"]).may_write(&c));
        assert!(who(Role::Writer, &["infra"]).may_write(&c));
        assert!(!who(Role::Writer, &["web"]).may_write(&c));
        assert!(who(Role::Admin, &[]).may_write(&c));
        c.owner.clear();
        assert!(who(Role::Reader, &[]).may_read(&c));
        assert!(!who(Role::Writer, &["infra"]).may_write(&c), "no owner: admins only");
    }
}
