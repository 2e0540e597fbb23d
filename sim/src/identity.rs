//! Identity tokens as Google mints them for an instance (`format=full`): RS256 JWTs signed with
//! the simulator's own key ([`KEY`], a fixed key that signs simulated tokens only), whose public
//! half is served as a JSON Web Key Set, as Google publishes its certificates.
//! (`https://www.googleapis.com/oauth2/v3/certs`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::signature::RsaPublicKeyComponents;
use serde::Deserialize;
use serde_json::json;

use super::Sim;
use super::world::World;

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

/// Routes: the published keys (`GET /oauth2/v3/certs`, as Google serves them) and
/// `POST /sim/identity` (`{project, zone, name, audience}` → `{token}`): the token the metadata
/// server would give that instance (`format=full`), valid for an hour of simulated time; 404
/// when no such instance lives.
pub(super) fn routes() -> Router<Sim> {
    Router::new().route("/oauth2/v3/certs", get(certs)).route("/sim/identity", post(identity))
}

async fn certs() -> Response {
    match jwk(KEY, KID) {
        Ok(k) => Json(json!({"keys": [k]})).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": e}))).into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Asked {
    project: String,
    zone: String,
    name: String,
    audience: String,
}

/// The `format=full` claims of instance `name` for `audience`, issued at `now`.
pub fn claims(w: &World, project: &str, zone: &str, name: &str, audience: &str) -> Option<serde_json::Value> {
    let key = (project.to_owned(), zone.to_owned(), name.to_owned());
    let i = w.instances.get(&key).filter(|i| !i.deleting)?;
    let now = w.now_utc().timestamp();
    Some(json!({
        "iss": "https://accounts.google.com", "aud": audience, "azp": "1", "sub": i.id.to_string(),
        "iat": now, "exp": now + 3600,
        "google": {"compute_engine": {
            "instance_id": i.id.to_string(), "instance_name": name, "zone": zone,
            "project_id": project, "project_number": 1, "instance_creation_timestamp": i.created.timestamp(),
        }},
    }))
}

async fn identity(State(sim): State<Sim>, body: axum::body::Bytes) -> Response {
    let a: Asked = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            let msg = format!("identity: {e} (expected project, zone, name, audience)");
            return (StatusCode::BAD_REQUEST, Json(json!({"error": msg}))).into_response();
        }
    };
    let Some(c) = sim.with(|w| claims(w, &a.project, &a.zone, &a.name, &a.audience)) else {
        return (StatusCode::NOT_FOUND, Json(json!({"error": format!("no instance {}", a.name)})))
            .into_response();
    };
    match sign(&c, KID, KEY) {
        Ok(token) => Json(json!({"token": token})).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": e}))).into_response(),
    }
}
