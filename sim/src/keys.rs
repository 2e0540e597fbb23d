//! The simulator's key material: the fixed RSA key that signs simulated identity tokens ([`KEY`],
//! not a secret), RS256 signing, and the public half as a JSON Web Key.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::signature::RsaPublicKeyComponents;

/// The simulator's signing key (PKCS#8 PEM). Not a secret: it signs simulated tokens only.
pub const KEY: &str = include_str!("identity_key.pem");
/// Its key id.
pub const KID: &str = "gce-backend-sim-1";

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

fn key_pair(pem: &str) -> Result<ring::rsa::KeyPair, String> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der =
        base64::engine::general_purpose::STANDARD.decode(body).map_err(|e| format!("key is not PEM: {e}"))?;
    ring::rsa::KeyPair::from_pkcs8(&der).map_err(|e| format!("key is not an RSA PKCS#8 key: {e}"))
}
