//! The simulator's key material: the fixed RSA key that signs simulated identity tokens ([`KEY`],
//! not a secret), the fixed key of its service account's key file ([`ACCOUNT_KEY`]), RS256
//! signing and checking, and the public half as a JSON Web Key.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::signature::RsaPublicKeyComponents;

/// The simulator's signing key (PKCS#8 PEM). Not a secret: it signs simulated tokens only.
pub const KEY: &str = include_str!("identity_key.pem");
/// Its key id.
pub const KID: &str = "gce-backend-sim-1";

/// The private key of the simulator's service account (PKCS#8 PEM), as a key file carries it
/// (`GET /sim/auth/key-file`). Not a secret: it only signs assertions the simulator checks.
pub const ACCOUNT_KEY: &str = include_str!("account_key.pem");
/// Its key id (`private_key_id` in the key file).
pub const ACCOUNT_KID: &str = "gce-backend-sim-account-1";

/// Signs `claims` as a token of key `kid` (RS256) with the PKCS#8 PEM `private_pem`. Errors
/// name what is wrong with the key.
pub fn sign(claims: &serde_json::Value, kid: &str, private_pem: &str) -> Result<String, String> {
    let pair = key_pair(private_pem)?;
    let header = serde_json::json!({"alg": "RS256", "kid": kid, "typ": "JWT"});
    let signed = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
    let mut sig = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signed.as_bytes(),
        &mut sig,
    )
    .map_err(|_| "signing failed".to_owned())?;
    Ok(format!("{signed}.{}", B64.encode(sig)))
}

/// The public half of the PKCS#8 PEM `private_pem` as a JSON Web Key of id `kid`.
pub fn jwk(private_pem: &str, kid: &str) -> Result<serde_json::Value, String> {
    let pair = key_pair(private_pem)?;
    let public: RsaPublicKeyComponents<Vec<u8>> = pair.public().into();
    Ok(serde_json::json!({
        "kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
        "n": B64.encode(&public.n), "e": B64.encode(&public.e),
    }))
}

/// The claims of `token` (a compact JWS) if it is an RS256 token of key `kid` whose signature
/// the key `private_pem` (its public half) verifies; else what is wrong with it.
pub fn verify(token: &str, kid: &str, private_pem: &str) -> Result<serde_json::Value, String> {
    let mut parts = token.split('.');
    let (Some(head), Some(body), Some(sig), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a JWT (three dot-separated parts)".into());
    };
    let json = |part: &str, what: &str| -> Result<serde_json::Value, String> {
        let bytes = B64.decode(part).map_err(|_| format!("{what}: not base64url"))?;
        serde_json::from_slice(&bytes).map_err(|_| format!("{what}: not JSON"))
    };
    let header = json(head, "header")?;
    if header["alg"] != "RS256" {
        return Err(format!("alg {} is not RS256", header["alg"]));
    }
    if header["kid"] != kid {
        return Err(format!("kid {} is not a key of this account", header["kid"]));
    }
    let sig = B64.decode(sig).map_err(|_| "signature: not base64url".to_owned())?;
    let public: RsaPublicKeyComponents<Vec<u8>> = key_pair(private_pem)?.public().into();
    public
        .verify(&ring::signature::RSA_PKCS1_2048_8192_SHA256, format!("{head}.{body}").as_bytes(), &sig)
        .map_err(|_| "invalid signature".to_owned())?;
    json(body, "claims")
}

fn key_pair(pem: &str) -> Result<ring::rsa::KeyPair, String> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der =
        base64::engine::general_purpose::STANDARD.decode(body).map_err(|e| format!("key is not PEM: {e}"))?;
    ring::rsa::KeyPair::from_pkcs8(&der).map_err(|e| format!("key is not an RSA PKCS#8 key: {e}"))
}
