//! The Cloud Billing Catalog API (v1 REST) for Compute Engine, served from the dated price
//! snapshot (`prices.rs`): `GET /v1/services` (Compute Engine only) and
//! `GET /v1/services/6F81-5844-456A/skus`, paged as Google pages them (`pageSize`, default 5000,
//! and opaque `pageToken`s), in USD only. Its errors are Google's for its newer APIs
//! (`{"error": {"code", "message", "status", "details"}}`, without Compute's legacy `errors`);
//! its calls are counted as `cloudbilling.services.list` and `cloudbilling.services.skus.list`;
//! the token check is `google.rs`'s guard's, as for Compute.

use std::collections::HashMap;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::digest::{SHA256, digest};
use serde_json::{Value, json};

use crate::handle::Sim;
use crate::prices::{COMPUTE_DISPLAY_NAME, COMPUTE_SERVICE_ID, skus};

/// The page size when none (or 0) is asked for, as the API documents it ("Defaults to 5000").
pub const DEFAULT_PAGE_SIZE: usize = 5000;
/// The largest page answered: v1 documents no maximum; its v1beta and v2beta siblings cap at 5000,
/// and a larger `pageSize` is served as 5000 here.
pub const MAX_PAGE_SIZE: usize = 5000;

/// The query parameters every Google API takes besides a method's own (system parameters).
const SYSTEM_PARAMS: &[&str] = &[
    "alt",
    "fields",
    "key",
    "prettyPrint",
    "quotaUser",
    "callback",
    "access_token",
    "upload_protocol",
    "uploadType",
];

/// Routes: the services list and Compute Engine's SKUs.
pub(super) fn routes() -> Router<Sim> {
    Router::new()
        .route("/v1/services", get(list_services))
        .route("/v1/services/{service}/skus", get(list_skus))
}

/// Google's error body of its newer APIs: `{"error": {"code", "message", "status"}}`, with
/// `details` when given.
pub(crate) fn error_body(code: u16, status: &str, message: &str, details: Option<Value>) -> Value {
    let mut body = json!({"error": {"code": code, "message": message, "status": status}});
    if let Some(d) = details {
        body["error"]["details"] = d;
    }
    body
}

/// The answer of an [`error_body`].
pub(crate) fn error(code: u16, status: &str, message: &str, details: Option<Value>) -> Response {
    let http = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (http, Json(error_body(code, status, message, details))).into_response()
}

/// A 400 `INVALID_ARGUMENT` naming `field`, as Google's front end refuses a parameter.
fn invalid(field: &str, message: &str) -> Response {
    let details = json!([{"@type": "type.googleapis.com/google.rpc.BadRequest",
        "fieldViolations": [{"field": field, "description": message}]}]);
    error(400, "INVALID_ARGUMENT", message, Some(details))
}

/// What a list call asked for: where its page starts and how long it is.
struct Page {
    start: usize,
    size: usize,
}

/// The page token of the page of `kind` (`services`, `skus` of a service) starting at `start`:
/// opaque, and refused when it was not issued for that list.
fn token(kind: &str, start: usize) -> String {
    let start = start as u32;
    let mac = digest(&SHA256, format!("gce-backend-sim catalog page\0{kind}\0{start}").as_bytes());
    B64.encode([start.to_be_bytes().as_slice(), &mac.as_ref()[..8]].concat())
}

fn open_token(kind: &str, t: &str) -> Option<usize> {
    let raw = B64.decode(t).ok()?;
    let start = u32::from_be_bytes(raw.get(..4)?.try_into().ok()?) as usize;
    (token(kind, start) == t).then_some(start)
}

/// A parameter refused: its field and why (answered by [`invalid`]).
struct Refusal(String, String);

/// Reads a list call's parameters (`own`: the method's own besides the paging ones): the page
/// asked for, or why Google's front end refuses them.
fn page(kind: &str, q: &HashMap<String, String>, own: &[&str]) -> Result<Page, Refusal> {
    for name in q.keys() {
        let known = ["pageSize", "pageToken"].contains(&name.as_str())
            || own.contains(&name.as_str())
            || SYSTEM_PARAMS.contains(&name.as_str())
            || name.starts_with('$');
        if !known {
            let m = format!(
                "Invalid JSON payload received. Unknown name \"{name}\": Cannot bind query parameter. Field '{name}' could not be found in request message."
            );
            return Err(Refusal(name.clone(), m));
        }
    }
    let size = match q.get("pageSize").map(|s| s.parse::<i32>()) {
        None => DEFAULT_PAGE_SIZE,
        Some(Err(_)) => {
            let m = format!("Invalid value at 'page_size' (TYPE_INT32), \"{}\"", q["pageSize"]);
            return Err(Refusal("page_size".into(), m));
        }
        Some(Ok(n)) if n < 0 => {
            return Err(Refusal("page_size".into(), "page_size must not be negative.".into()));
        }
        Some(Ok(0)) => DEFAULT_PAGE_SIZE,
        Some(Ok(n)) => (n as usize).min(MAX_PAGE_SIZE),
    };
    let start = match q.get("pageToken").filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => {
            open_token(kind, t).ok_or_else(|| Refusal("page_token".into(), "Invalid page token.".into()))?
        }
    };
    Ok(Page { start, size })
}

/// The page of `items` asked for, under `field`, with `nextPageToken` while more remain.
fn answer(kind: &str, field: &str, items: &[Value], p: &Page) -> Response {
    let end = p.start.saturating_add(p.size).min(items.len());
    let page = items.get(p.start.min(end)..end).unwrap_or_default();
    let next = if end < items.len() { token(kind, end) } else { String::new() };
    Json(json!({field: page, "nextPageToken": next})).into_response()
}

/// `GET /v1/services`: the public services (Compute Engine only).
async fn list_services(State(sim): State<Sim>, Query(q): Query<HashMap<String, String>>) -> Response {
    let resp = match page("services", &q, &[]) {
        Err(Refusal(field, message)) => invalid(&field, &message),
        Ok(p) => {
            let compute = json!({"name": format!("services/{COMPUTE_SERVICE_ID}"),
                "serviceId": COMPUTE_SERVICE_ID, "displayName": COMPUTE_DISPLAY_NAME,
                "businessEntityName": "businessEntities/GCP"});
            answer("services", "services", &[compute], &p)
        }
    };
    sim.answer("cloudbilling.services.list", resp)
}

/// `GET /v1/services/{service}/skus`: the snapshot's SKUs of Compute Engine, in USD (another
/// `currencyCode` is refused: the snapshot has no conversion rates); `startTime`/`endTime` are
/// taken and the snapshot's one pricing version is answered whatever the range.
async fn list_skus(
    State(sim): State<Sim>,
    Path(service): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let kind = format!("skus/{service}");
    let resp = match page(&kind, &q, &["currencyCode", "startTime", "endTime"]) {
        Err(Refusal(field, message)) => invalid(&field, &message),
        Ok(_) if service != COMPUTE_SERVICE_ID => {
            error(404, "NOT_FOUND", "Requested entity was not found.", None)
        }
        Ok(_) if q.get("currencyCode").is_some_and(|c| !c.is_empty() && c != "USD") => invalid(
            "currency_code",
            &format!("Currency code {} is not supported: this catalog lists USD only.", q["currencyCode"]),
        ),
        Ok(p) => answer(&kind, "skus", skus(), &p),
    };
    sim.answer("cloudbilling.services.skus.list", resp)
}

#[cfg(test)]
mod tests;
