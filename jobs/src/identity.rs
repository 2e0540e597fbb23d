//! Compute Engine instance identity tokens: the proof a VM sends when it registers. A token is
//! a JWT signed by Google (RS256) whose `format=full` claims name the instance (id, name, zone,
//! project). [`verify`] checks the signature against Google's published keys ([`keys_from_jwks`]),
//! the issuer, the audience and the time, and returns who the instance says it is. The
//! signature is checked with `ring` (RSASSA-PKCS1-v1_5 with SHA-256, the TLS stack's own
//! crypto); the token's three parts are read here, and the rules are here (RS256 only, a
//! published key of 2048 bits or more, Google's issuer, our audience, times from the Clock with a
//! minute of skew, at most an hour long). Every refusal is one [`Refused`] whose reason is for our
//! logs and tests only: callers answer one generic 403 (seed 000: no hint of which part was
//! wrong).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use chrono::{DateTime, Utc};
use serde::Deserialize;

/// Largest token looked at (a Compute Engine token is about 1 KiB).
pub const MAX_TOKEN: usize = 8 * 1024;
/// Clock skew allowed between Google and us.
const SKEW_SECS: i64 = 60;
/// Longest lifetime of a token (Google's last an hour).
const MAX_LIFETIME_SECS: i64 = 3600;
/// Issuers of Google identity tokens.
const ISSUERS: [&str; 2] = ["https://accounts.google.com", "accounts.google.com"];
/// Shortest RSA modulus trusted (bits).
const MIN_RSA_BITS: usize = 2048;

/// One RSA public key of the issuer, by key id.
#[derive(Debug, Clone)]
pub struct Key {
    /// Key id (`kid` in the token's header).
    pub kid: String,
    /// The modulus, big-endian, without leading zeros.
    n: Vec<u8>,
    /// The public exponent, big-endian.
    e: Vec<u8>,
}

/// Who a verified token says the instance is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Compute Engine's numeric instance id (one per incarnation, even when a name comes back).
    pub instance_id: String,
    /// Instance name: our VM's hostname.
    pub instance_name: String,
    /// Zone.
    pub zone: String,
    /// Project id.
    pub project: String,
    /// When the token expires.
    pub expires: DateTime<Utc>,
}

/// Why a token was refused. Never shown to the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("identity token refused: {0}")]
pub struct Refused(pub &'static str);

impl Refused {
    /// The reasons given only once a proof's signature held (by `identify` and `register`):
    /// a real machine was refused, which is worth an operator's look.
    const AFTER_SIGNATURE: &[&str] = &[
        "no VM of that name",
        "another instance",
        "another incarnation of the name",
        "already registered",
        "store",
    ];

    /// True when the proof was genuine but named nothing it may register as.
    pub fn after_signature(&self) -> bool {
        Self::AFTER_SIGNATURE.contains(&self.0)
    }
}

/// Reads Google's JSON Web Key Set (`https://www.googleapis.com/oauth2/v3/certs`): its RSA
/// keys; other key types, and RSA keys shorter than 2048 bits, are skipped.
pub fn keys_from_jwks(json: &[u8]) -> Result<Vec<Key>, String> {
    #[derive(Deserialize)]
    struct Jwks {
        keys: Vec<Jwk>,
    }
    #[derive(Deserialize)]
    struct Jwk {
        kty: String,
        #[serde(default)]
        kid: String,
        #[serde(default)]
        n: String,
        #[serde(default)]
        e: String,
    }
    let set: Jwks = serde_json::from_slice(json).map_err(|e| format!("not a JSON Web Key Set: {e}"))?;
    let mut keys = Vec::new();
    // A key with no id could only match a token naming none: skipped, as keys of other types.
    for k in set.keys.into_iter().filter(|k| k.kty == "RSA" && !k.kid.is_empty()) {
        let part = |v: &str| B64.decode(v.trim_end_matches('=')).ok().filter(|b| !b.is_empty());
        let (Some(n), Some(e)) = (part(&k.n), part(&k.e)) else {
            return Err(format!("key {}: n or e is not base64url", k.kid));
        };
        let n = n[n.iter().take_while(|b| **b == 0).count()..].to_vec();
        if rsa_bits(&n) >= MIN_RSA_BITS {
            keys.push(Key { kid: k.kid, n, e });
        }
    }
    Ok(keys)
}

/// The length of an RSA modulus (big-endian, no leading zeros) in bits.
fn rsa_bits(n: &[u8]) -> usize {
    n.first().map_or(0, |top| n.len() * 8 - top.leading_zeros() as usize)
}

/// A token's header: only what is read of it.
#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: String,
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    aud: String,
    exp: i64,
    iat: i64,
    google: Google,
}

#[derive(Deserialize)]
struct Google {
    compute_engine: ComputeEngine,
}

#[derive(Deserialize)]
struct ComputeEngine {
    instance_id: String,
    instance_name: String,
    zone: String,
    project_id: String,
}

/// A part of the token, base64url without padding, read as JSON.
fn json_part<T: serde::de::DeserializeOwned>(part: &str) -> Result<T, Refused> {
    let bytes = B64.decode(part).map_err(|_| Refused("not base64url"))?;
    serde_json::from_slice(&bytes).map_err(|_| Refused("claims or header do not decode"))
}

/// Verifies `token` (RS256 by one of `keys`, from Google, for `audience`, valid at `now`).
pub fn verify(token: &str, keys: &[Key], audience: &str, now: DateTime<Utc>) -> Result<Identity, Refused> {
    if token.len() > MAX_TOKEN {
        return Err(Refused("too long"));
    }
    let parts: Vec<&str> = token.split('.').collect();
    let [header_b64, payload, signature] = parts[..] else { return Err(Refused("not three parts")) };
    let header: Header = json_part(header_b64)?;
    if header.alg != "RS256" {
        return Err(Refused("not RS256"));
    }
    let key = keys.iter().find(|k| k.kid == header.kid).ok_or(Refused("unknown key id"))?;
    let signature = B64.decode(signature).map_err(|_| Refused("signature is not base64url"))?;
    // The signature covers the header and the claims as sent; the claims are read only under
    // a good one.
    let signed = &token[..header_b64.len() + 1 + payload.len()];
    ring::signature::RsaPublicKeyComponents { n: &key.n, e: &key.e }
        .verify(&ring::signature::RSA_PKCS1_2048_8192_SHA256, signed.as_bytes(), &signature)
        .map_err(|_| Refused("bad signature"))?;
    let claims: Claims = json_part(payload)?;
    if !ISSUERS.contains(&claims.iss.as_str()) {
        return Err(Refused("issuer"));
    }
    if claims.aud != audience {
        return Err(Refused("audience"));
    }
    let t = now.timestamp();
    if claims.exp.saturating_add(SKEW_SECS) <= t {
        return Err(Refused("expired"));
    }
    if claims.iat.saturating_sub(SKEW_SECS) > t {
        return Err(Refused("issued in the future"));
    }
    if claims.exp.saturating_sub(claims.iat) > MAX_LIFETIME_SECS.saturating_add(SKEW_SECS) {
        return Err(Refused("lives too long"));
    }
    let ce = claims.google.compute_engine;
    let expires = DateTime::from_timestamp(claims.exp, 0).ok_or(Refused("exp out of range"))?;
    Ok(Identity {
        instance_id: ce.instance_id,
        instance_name: ce.instance_name,
        zone: ce.zone,
        project: ce.project_id,
        expires,
    })
}

#[cfg(test)]
mod tests;
