//! Identity tokens as Google mints them for an instance (`format=full`): RS256 JWTs signed with
//! the simulator's own key ([`KEY`], a fixed key that signs simulated tokens only, in `keys.rs`),
//! whose public half is served as a JSON Web Key Set, as Google publishes its certificates.
//! (`https://www.googleapis.com/oauth2/v3/certs`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::handle::Sim;
pub use crate::keys::{KEY, KID, jwk, sign};

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

async fn identity(State(sim): State<Sim>, body: axum::body::Bytes) -> Response {
    let a: Asked = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            let msg = format!("identity: {e} (expected project, zone, name, audience)");
            return (StatusCode::BAD_REQUEST, Json(json!({"error": msg}))).into_response();
        }
    };
    let Some(c) = sim.with(|w| w.claims(&a.project, &a.zone, &a.name, &a.audience)) else {
        return (StatusCode::NOT_FOUND, Json(json!({"error": format!("no instance {}", a.name)})))
            .into_response();
    };
    match sign(&c, KID, KEY) {
        Ok(token) => Json(json!({"token": token})).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": e}))).into_response(),
    }
}
