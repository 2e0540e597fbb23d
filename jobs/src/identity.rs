//! Compute Engine instance identity tokens: the proof a VM sends when it registers. A token is
//! a JWT signed by Google (RS256) whose `format=full` claims name the instance (id, name, zone,
//! project). [`verify`] checks the signature against Google's published keys ([`keys_from_jwks`]),
//! the issuer, the audience and the time, and returns who the instance says it is. The JWT's
//! decoding and its signature are the `jsonwebtoken` crate's; the rules (RS256 only, a published
//! key of 2048 bits or more, Google's issuer, our audience, times from the Clock with a minute of
//! skew, at most an hour long) are here. Every refusal is one [`Refused`] whose reason is for our
//! logs and tests only: callers answer one generic 403 (seed 000: no hint of which part was
//! wrong).

use chrono::{DateTime, Utc};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, DecodingKeyKind, Validation};
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
    /// The public key.
    pub key: DecodingKey,
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
        let key = DecodingKey::from_rsa_components(k.n.trim_end_matches('='), k.e.trim_end_matches('='))
            .map_err(|e| format!("key {}: n or e: {e}", k.kid))?;
        if rsa_bits(&key) >= MIN_RSA_BITS {
            keys.push(Key { kid: k.kid, key });
        }
    }
    Ok(keys)
}

/// The length of an RSA key's modulus in bits (0 for another kind of key).
fn rsa_bits(key: &DecodingKey) -> usize {
    let DecodingKeyKind::RsaModulusExponent { n, .. } = key.kind() else { return 0 };
    let n = &n[n.iter().take_while(|b| **b == 0).count()..];
    n.first().map_or(0, |top| n.len() * 8 - top.leading_zeros() as usize)
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

/// The reason for a refusal the library found (format, algorithm, signature).
fn reason(e: &jsonwebtoken::errors::Error) -> Refused {
    Refused(match e.kind() {
        ErrorKind::Base64(_) => "not base64url",
        // A header naming an algorithm the library does not know (`none`) does not decode.
        ErrorKind::Json(j) if j.to_string().starts_with("unknown variant") => "not RS256",
        ErrorKind::InvalidAlgorithm => "not RS256",
        ErrorKind::InvalidSignature => "bad signature",
        _ => "claims or header do not decode",
    })
}

/// Verifies `token` (RS256 by one of `keys`, from Google, for `audience`, valid at `now`).
pub fn verify(token: &str, keys: &[Key], audience: &str, now: DateTime<Utc>) -> Result<Identity, Refused> {
    if token.len() > MAX_TOKEN {
        return Err(Refused("too long"));
    }
    if token.split('.').count() != 3 {
        return Err(Refused("not three parts"));
    }
    let header = jsonwebtoken::decode_header(token).map_err(|e| reason(&e))?;
    if header.alg != Algorithm::RS256 {
        return Err(Refused("not RS256"));
    }
    let kid = header.kid.unwrap_or_default();
    let key = keys.iter().find(|k| k.kid == kid).ok_or(Refused("unknown key id"))?;
    // The library checks the algorithm again and the signature, and decodes the claims; the
    // claims' rules are below (the time from our Clock, not the library's).
    let mut signed = Validation::new(Algorithm::RS256);
    signed.required_spec_claims.clear();
    (signed.validate_exp, signed.validate_aud) = (false, false);
    let claims = match jsonwebtoken::decode::<Claims>(token, &key.key, &signed) {
        Ok(t) => t.claims,
        // The header decoded above, and the claims are decoded only under a good signature.
        Err(e) if matches!(e.kind(), ErrorKind::Base64(_)) => {
            return Err(Refused("signature is not base64url"));
        }
        Err(e) => return Err(reason(&e)),
    };
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
