//! Unit tests of `identity.rs`.

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
    assert_eq!(refused(&sign(&claims(AUD, ok_exp), "a", B).unwrap()), "bad signature", "forged: another key");
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
        let header = B64.encode(json!({"alg": "HS256", "typ": "JWT", "kid": "a"}).to_string());
        let signed = format!("{header}.{}", B64.encode(claims(AUD, ok_exp).to_string()));
        let mac =
            ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret), signed.as_bytes());
        assert_eq!(refused(&format!("{signed}.{}", B64.encode(mac.as_ref()))), "not RS256");
    }
    // Another RSA algorithm with the right key, and a token naming no key.
    let rs512 =
        format!("{}.{}.{}", B64.encode(json!({"alg": "RS512", "kid": "a"}).to_string()), parts[1], parts[2]);
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
