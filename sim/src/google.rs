//! Google's authentication on the wire: the metadata server's token, identity and email
//! endpoints (as Application Default Credentials find them through `GCE_METADATA_HOST`), the OAuth
//! token endpoint a service-account key file names (JWT-bearer assertions), the key file itself
//! (`GET /sim/auth/key-file`), `/sim/auth` (settings and what every token saw), and [`guard`],
//! which counts every Compute, Billing Catalog and Swarming call's token and, with
//! `--require-auth`, refuses the call as Google (Compute, Billing) and LUCI (Swarming) do.

use std::collections::HashMap;

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{ACCOUNT_EMAIL, Api, DEFAULT_SCOPES, Standing};
use crate::billing;
use crate::gce_call::{answer_error, error_body};
use crate::handle::{HANG, Sim};
use crate::keys::{ACCOUNT_KEY, ACCOUNT_KID, KEY, KID, sign, verify};
use crate::prpc::{Status, fail};
use crate::world::{ApiError, Source};

const MDS: &str = "/computeMetadata/v1";
/// The OAuth token endpoint's path (a key file's `token_uri` is this on the simulator's origin).
pub(crate) const TOKEN_PATH: &str = "/oauth2/token";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// Routes: the metadata server, the OAuth token endpoint, `/sim/auth` and its key file.
pub(super) fn routes() -> Router<Sim> {
    let account = format!("{MDS}/instance/service-accounts/default");
    Router::new()
        .route(&format!("{account}/token"), get(token))
        .route(&format!("{account}/identity"), get(identity))
        .route(&format!("{account}/email"), get(email))
        .route(&format!("{MDS}/universe/universe-domain"), get(universe))
        .route(&format!("{MDS}/project/project-id"), get(project_id))
        .route(TOKEN_PATH, post(oauth_token))
        .route("/sim/auth", get(report).post(settings))
        .route("/sim/auth/key-file", get(key_file))
}

/// The metadata server's answer of `body`, or its refusal of a request without
/// `Metadata-Flavor: Google` or with `X-Forwarded-For` (as Compute Engine's refuses a request
/// that may come through a proxy); hangs while the metadata server is down.
async fn metadata(sim: &Sim, headers: &HeaderMap, body: impl FnOnce(&Sim) -> Response) -> Response {
    if sim.with(|w| w.accounts.metadata_down) {
        tokio::time::sleep(HANG).await;
    }
    let flavor = headers.get("metadata-flavor").and_then(|v| v.to_str().ok()) == Some("Google");
    if !flavor || headers.contains_key("x-forwarded-for") {
        return (StatusCode::FORBIDDEN, "Missing required header: Metadata-Flavor: Google\n").into_response();
    }
    let mut resp = body(sim);
    resp.headers_mut().insert("metadata-flavor", header::HeaderValue::from_static("Google"));
    resp
}

/// A token with `scopes` from `source`, answered as Google's token endpoints answer it.
fn issue(sim: &Sim, source: Source, scopes: Vec<String>) -> Response {
    let (token, ttl) = sim.with(|w| {
        let now = w.now();
        w.accounts.issue(source, scopes, now)
    });
    Json(json!({"access_token": token, "expires_in": ttl, "token_type": "Bearer"})).into_response()
}

fn text(s: &str) -> Response {
    ([(header::CONTENT_TYPE, "application/text")], s.to_owned()).into_response()
}

async fn token(
    State(sim): State<Sim>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    metadata(&sim, &headers, |sim| {
        let scopes: Vec<String> = match q.get("scopes") {
            Some(s) => s.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect(),
            None => DEFAULT_SCOPES.iter().map(|s| (*s).to_owned()).collect(),
        };
        issue(sim, Source::Metadata, scopes)
    })
    .await
}

async fn identity(
    State(sim): State<Sim>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    metadata(&sim, &headers, |sim| {
        let Some(aud) = q.get("audience").filter(|a| !a.is_empty()) else {
            return (StatusCode::BAD_REQUEST, "non-empty audience parameter required\n").into_response();
        };
        let (now, ttl) = sim.with(|w| (w.now_utc().timestamp(), w.accounts.settings.token_ttl_s as i64));
        let claims = json!({"iss": "https://accounts.google.com", "aud": aud, "azp": ACCOUNT_EMAIL,
            "sub": "100000000000000000001", "email": ACCOUNT_EMAIL, "email_verified": true,
            "iat": now, "exp": now + ttl});
        match sign(&claims, KID, KEY) {
            Ok(t) => text(&t),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        }
    })
    .await
}

async fn email(State(sim): State<Sim>, headers: HeaderMap) -> Response {
    metadata(&sim, &headers, |_| text(ACCOUNT_EMAIL)).await
}

async fn universe(State(sim): State<Sim>, headers: HeaderMap) -> Response {
    metadata(&sim, &headers, |_| text("googleapis.com")).await
}

async fn project_id(State(sim): State<Sim>, headers: HeaderMap) -> Response {
    metadata(&sim, &headers, |_| text("sim-project")).await
}

/// An OAuth error answer (RFC 6749 §5.2, as Google's token endpoint words them).
fn oauth_error(error: &str, description: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": error, "error_description": description}))).into_response()
}

/// `POST /oauth2/token`: a key file's signed assertion (`grant_type` JWT bearer) for an access
/// token with the assertion's `scope`.
async fn oauth_token(State(sim): State<Sim>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let form: HashMap<String, String> = match serde_urlencoded::from_bytes(&body) {
        Ok(f) => f,
        Err(_) => return oauth_error("invalid_request", "The request body is not a form."),
    };
    let grant = form.get("grant_type").map(String::as_str).unwrap_or("");
    if grant != JWT_BEARER {
        return oauth_error("unsupported_grant_type", &format!("Invalid grant_type: {grant}"));
    }
    let Some(assertion) = form.get("assertion") else {
        return oauth_error("invalid_request", "Missing required parameter: assertion");
    };
    let claims = match verify(assertion, ACCOUNT_KID, ACCOUNT_KEY) {
        Ok(c) => c,
        Err(_) => return oauth_error("invalid_grant", "Invalid JWT Signature."),
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if claims["aud"] != format!("http://{host}{TOKEN_PATH}") {
        return oauth_error("invalid_grant", "Invalid JWT: Failed audience check.");
    }
    if claims["iss"] != ACCOUNT_EMAIL {
        return oauth_error("invalid_grant", "Invalid grant: account not found");
    }
    let now = sim.with(|w| w.now_utc().timestamp());
    let (iat, exp) = (claims["iat"].as_i64().unwrap_or(0), claims["exp"].as_i64().unwrap_or(0));
    if exp <= now || iat > now + 300 || exp - iat > 3600 {
        return oauth_error(
            "invalid_grant",
            "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.",
        );
    }
    let scopes: Vec<String> = claims["scope"]
        .as_str()
        .unwrap_or("")
        .split(' ')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if scopes.is_empty() {
        return oauth_error("invalid_scope", "Invalid oauth scope or ID token audience provided.");
    }
    issue(&sim, Source::KeyFile, scopes)
}

/// `GET /sim/auth/key-file`: a service-account key file whose `token_uri` is this simulator's.
async fn key_file(headers: HeaderMap) -> Response {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    Json(json!({
        "type": "service_account", "project_id": "sim-project",
        "private_key_id": ACCOUNT_KID, "private_key": ACCOUNT_KEY,
        "client_email": ACCOUNT_EMAIL, "client_id": "100000000000000000001",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": format!("http://{host}{TOKEN_PATH}"),
        "universe_domain": "googleapis.com",
    }))
    .into_response()
}

async fn report(State(sim): State<Sim>) -> Response {
    Json(sim.with(|w| {
        let a = &w.accounts;
        let servers: serde_json::Map<String, Value> = a
            .servers
            .iter()
            .map(|(h, (with, without))| (h.clone(), json!({"with_token": with, "without_token": without})))
            .collect();
        json!({
            "settings": a.settings, "metadata": if a.metadata_down { "down" } else { "up" },
            "requests": a.requests, "standings": a.standings, "servers": servers,
            "tokens": a.reports(|t| w.clock_ms(t)),
        })
    }))
    .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    require_auth: Option<bool>,
    token_ttl_s: Option<u64>,
    anonymous_swarming: Option<Vec<String>>,
    metadata: Option<String>,
}

/// `POST /sim/auth`: changes the settings; each field given replaces that setting. `metadata`
/// is `up` or `down` (the metadata server stops answering).
async fn settings(State(sim): State<Sim>, body: axum::body::Bytes) -> Response {
    let bad = |m: String| (StatusCode::BAD_REQUEST, Json(json!({"error": m}))).into_response();
    let c: Change = match serde_json::from_slice(&body) {
        Ok(c) => c,
        Err(e) => {
            return bad(format!(
                "auth: {e} (expected require_auth, token_ttl_s, anonymous_swarming, metadata: up|down)"
            ));
        }
    };
    if c.token_ttl_s.is_some_and(|t| !(5..=86_400).contains(&t)) {
        return bad("auth: token_ttl_s must be between 5 and 86400".into());
    }
    let down = match c.metadata.as_deref() {
        None => None,
        Some("up") => Some(false),
        Some("down") => Some(true),
        Some(other) => return bad(format!("auth: metadata {other:?} is not up or down")),
    };
    sim.with(|w| {
        let s = &mut w.accounts.settings;
        s.require_auth = c.require_auth.unwrap_or(s.require_auth);
        s.token_ttl_s = c.token_ttl_s.unwrap_or(s.token_ttl_s);
        if let Some(v) = c.anonymous_swarming {
            s.anonymous_swarming = v;
        }
        if let Some(d) = down {
            w.accounts.metadata_down = d;
        }
    });
    report(State(sim)).await
}

/// Google's refusal of a call to `api` (Compute or the Billing Catalog) of `standing`: Compute's
/// error body (with its legacy `errors`) or that of Google's newer APIs, each naming its service.
fn google_refusal(api: Api, standing: Standing) -> Response {
    let (status, reason, info, message) = match standing {
        Standing::Missing => (
            401,
            "required",
            "CREDENTIALS_MISSING",
            "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
        ),
        Standing::Scope => (
            403,
            "insufficientPermissions",
            "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
            "Request had insufficient authentication scopes.",
        ),
        _ => (
            401,
            "authError",
            "ACCESS_TOKEN_EXPIRED",
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
        ),
    };
    let state = if status == 401 { "UNAUTHENTICATED" } else { "PERMISSION_DENIED" };
    let info = |metadata: Value| {
        json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": info,
            "domain": "googleapis.com", "metadata": metadata}])
    };
    let mut resp = if api == Api::Billing {
        let metadata = json!({"service": "cloudbilling.googleapis.com",
            "method": "google.cloud.billing.v1.CloudCatalog.ListSkus"});
        billing::error(status, state, message, Some(info(metadata)))
    } else {
        let e = ApiError { status, reason, message: message.into() };
        answer_error(
            &e,
            error_body(&e, Some(state), Some(info(json!({"service": "compute.googleapis.com"})))),
        )
    };
    if status == 401 {
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"https://accounts.google.com/\""),
        );
    }
    resp
}

/// Counts the token of every Compute, Billing Catalog and Swarming call and, when the settings say
/// so, refuses one without a current token of the API's scope: Compute and Billing as Google answer, Swarming as LUCI's
/// server does (a bad, expired or under-scoped token is UNAUTHENTICATED, `oauth: bad access
/// token`; none is the anonymous identity, which Swarming's permissions refuse).
pub(crate) async fn guard(State(sim): State<Sim>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let (api, server) = if path.starts_with("/compute/") {
        (Api::Compute, None)
    } else if path == "/v1/services" || path.starts_with("/v1/services/") {
        (Api::Billing, None)
    } else if let Some(rest) = path.strip_prefix("/swarming/") {
        (Api::Swarming, rest.split('/').next().map(str::to_owned))
    } else {
        return next.run(req).await;
    };
    let authorization = req.headers().get(header::AUTHORIZATION).map(|v| v.to_str().unwrap_or(""));
    let (standing, refused) = sim.with(|w| {
        let now = (w.now(), w.now_utc().timestamp());
        let s = w.accounts.authenticate(api, server.as_deref(), authorization, now);
        (s, w.accounts.refuses(api, server.as_deref(), s))
    });
    if !refused {
        return next.run(req).await;
    }
    match api {
        Api::Compute | Api::Billing => google_refusal(api, standing),
        Api::Swarming if standing == Standing::Missing => {
            fail(Status(7, "anonymous:anonymous does not have permission to call this method".into()))
        }
        Api::Swarming => fail(Status(16, "oauth: bad access token".into())),
    }
}
