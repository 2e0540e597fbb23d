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
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;
    use gce_backend_sim::identity::{jwk, sign};

    const A: &str = include_str!("testdata/a.pem");
    const B: &str = include_str!("testdata/b.pem");

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).unwrap()
    }

    fn claims(aud: &str, exp: DateTime<Utc>) -> serde_json::Value {
        json!({
            "iss": "https://accounts.google.com", "aud": aud, "azp": "1", "sub": "1",
            "iat": (exp - chrono::Duration::hours(1)).timestamp(), "exp": exp.timestamp(),
            "google": {"compute_engine": {
                "instance_id": "4242", "instance_name": "linux-0-abcd", "zone": "us-central1-b",
                "project_id": "p", "project_number": 7, "instance_creation_timestamp": 1,
            }},
        })
    }

    fn keys() -> Vec<Key> {
        // Besides key a: an EC key, and an RSA key of 1024 bits (never trusted).
        let weak = json!({"kty": "RSA", "kid": "weak", "n": B64.encode([0xc5; 128]), "e": "AQAB"});
        let mut no_kid = jwk(A, "a").unwrap();
        no_kid["kid"] = json!("");
        let set = json!({"keys": [jwk(A, "a").unwrap(), {"kty": "EC", "kid": "x"}, weak, no_kid]});
        keys_from_jwks(set.to_string().as_bytes()).unwrap()
    }

    const AUD: &str = "https://gce-backend.example.com";

    #[test]
    fn a_token_signed_by_a_published_key_for_us_names_its_instance() {
        let exp = now() + chrono::Duration::minutes(30);
        let token = sign(&claims(AUD, exp), "a", A).unwrap();
        let id = verify(&token, &keys(), AUD, now()).unwrap();
        assert_eq!(
            (id.instance_id.as_str(), id.instance_name.as_str(), id.zone.as_str(), id.project.as_str()),
            ("4242", "linux-0-abcd", "us-central1-b", "p")
        );
        assert_eq!(id.expires, exp);
        assert_eq!(
            keys().iter().map(|k| k.kid.as_str()).collect::<Vec<_>>(),
            ["a"],
            "EC, weak and unnamed skipped"
        );
        assert!(keys_from_jwks(br#"{"keys": [{"kty": "RSA", "kid": "k", "n": "!", "e": "AQAB"}]}"#).is_err());
    }

    #[test]
    fn every_flaw_is_refused() {
        let ok_exp = now() + chrono::Duration::minutes(30);
        let good = sign(&claims(AUD, ok_exp), "a", A).unwrap();
        let refused = |token: &str| verify(token, &keys(), AUD, now()).unwrap_err().0;
        assert_eq!(refused(&sign(&claims("https://other.example.com", ok_exp), "a", A).unwrap()), "audience");
        assert_eq!(
            refused(&sign(&claims(AUD, now() - chrono::Duration::minutes(5)), "a", A).unwrap()),
            "expired"
        );
        assert_eq!(
            refused(&sign(&claims(AUD, ok_exp), "a", B).unwrap()),
            "bad signature",
            "forged: another key"
        );
        assert_eq!(refused(&sign(&claims(AUD, ok_exp), "b", B).unwrap()), "unknown key id");
        let mut other_issuer = claims(AUD, ok_exp);
        other_issuer["iss"] = json!("https://evil.example.com");
        assert_eq!(refused(&sign(&other_issuer, "a", A).unwrap()), "issuer");
        // The claims swapped under a valid signature.
        let parts: Vec<&str> = good.split('.').collect();
        let swapped = B64.encode(claims("https://other.example.com", ok_exp).to_string());
        assert_eq!(refused(&format!("{}.{swapped}.{}", parts[0], parts[2])), "bad signature");
        // alg none; HS256 keyed with the public key (its published JWK, or its modulus).
        let none = B64.encode(json!({"alg": "none", "kid": "a"}).to_string());
        assert_eq!(refused(&format!("{none}.{}.", parts[1])), "not RS256");
        let public = jwk(A, "a").unwrap();
        let n = B64.decode(public["n"].as_str().unwrap()).unwrap();
        for secret in [public.to_string().into_bytes(), n] {
            let header =
                jsonwebtoken::Header { kid: Some("a".into()), ..jsonwebtoken::Header::new(Algorithm::HS256) };
            let key = jsonwebtoken::EncodingKey::from_secret(&secret);
            let hs256 = jsonwebtoken::encode(&header, &claims(AUD, ok_exp), &key).unwrap();
            assert_eq!(refused(&hs256), "not RS256");
        }
        // Another RSA algorithm with the right key, and a token naming no key.
        let rs512 = format!(
            "{}.{}.{}",
            B64.encode(json!({"alg": "RS512", "kid": "a"}).to_string()),
            parts[1],
            parts[2]
        );
        assert_eq!(refused(&rs512), "not RS256");
        let no_kid = format!("{}.{}.{}", B64.encode(json!({"alg": "RS256"}).to_string()), parts[1], parts[2]);
        assert_eq!(refused(&no_kid), "unknown key id");
        // Garbage, too long.
        assert_eq!(refused("a.b"), "not three parts");
        assert_eq!(refused(&format!("{}.{}.!!", parts[0], parts[1])), "signature is not base64url");
        assert_eq!(refused(&"x".repeat(MAX_TOKEN + 1)), "too long");
        // Longer-lived than Google's, or without its issue time.
        let mut long = claims(AUD, ok_exp);
        long["iat"] = json!((ok_exp - chrono::Duration::days(2)).timestamp());
        assert_eq!(refused(&sign(&long, "a", A).unwrap()), "lives too long");
        let mut no_iat = claims(AUD, ok_exp);
        no_iat.as_object_mut().unwrap().remove("iat");
        assert_eq!(refused(&sign(&no_iat, "a", A).unwrap()), "claims or header do not decode");
        // A token without the Compute Engine claims (a user's ID token).
        let mut user = claims(AUD, ok_exp);
        user.as_object_mut().unwrap().remove("google");
        assert_eq!(refused(&sign(&user, "a", A).unwrap()), "claims or header do not decode");
    }
}
