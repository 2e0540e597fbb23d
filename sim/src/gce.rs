//! Compute Engine v1 REST, at the paths the official client uses: instances insert, get, delete,
//! list; zoneOperations get and wait; zones.list; diskTypes.list; regions.list.

use std::collections::HashMap;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::Sim;
use super::config::ErrorFault;
use super::filter::Filter;
use super::world::{ApiError, OpStatus, url};

type Params = Query<HashMap<String, String>>;

pub(super) fn routes() -> Router<Sim> {
    let base = "/compute/v1/projects/{project}";
    Router::new()
        .route(&format!("{base}/zones/{{zone}}/instances"), post(insert).get(list))
        .route(&format!("{base}/zones/{{zone}}/instances/{{name}}"), get(get_instance).delete(delete))
        .route(&format!("{base}/zones/{{zone}}/operations/{{op}}"), get(get_operation))
        .route(&format!("{base}/zones/{{zone}}/operations/{{op}}/wait"), post(wait))
        .route(&format!("{base}/zones"), get(zones))
        .route(&format!("{base}/zones/{{zone}}/diskTypes"), get(disk_types))
        .route(&format!("{base}/regions"), get(regions))
}

/// Compute Engine's error body: `{"error": {"code", "message", "errors": [{"message", "domain", "reason"}]}}`.
fn error(e: ApiError) -> Response {
    let body = json!({"error": {"code": e.status, "message": e.message,
        "errors": [{"message": e.message, "domain": "global", "reason": e.reason}]}});
    (StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), Json(body)).into_response()
}

fn injected(f: &ErrorFault) -> Response {
    error(match f.status {
        429 => ApiError { status: 429, reason: "rateLimitExceeded", message: "Rate Limit Exceeded".into() },
        403 => ApiError { status: 403, reason: "rateLimitExceeded", message: "Rate Limit Exceeded".into() },
        _ => ApiError {
            status: 503,
            reason: "backendError",
            message: "Internal error. Please try again.".into(),
        },
    })
}

/// Runs a handler body after the faults, and counts the answer.
async fn call(sim: &Sim, method: &str, f: impl FnOnce(&Sim) -> Result<Value, ApiError>) -> Response {
    let resp = match sim.enter(method).await {
        Some(fault) => injected(&fault),
        None => match f(sim) {
            Ok(v) => Json(v).into_response(),
            Err(e) => error(e),
        },
    };
    sim.answer(method, resp)
}

fn op(sim: &Sim, name: &str) -> Result<Value, ApiError> {
    sim.with(|w| w.op_json(name)).ok_or_else(|| ApiError {
        status: 500,
        reason: "internal",
        message: "lost operation".into(),
    })
}

async fn insert(
    State(sim): State<Sim>,
    Path((project, zone)): Path<(String, String)>,
    q: Params,
    body: Bytes,
) -> Response {
    call(&sim, "compute.instances.insert", |sim| {
        let body: Value = serde_json::from_slice(&body).map_err(|e| ApiError {
            status: 400,
            reason: "parseError",
            message: format!("Invalid JSON payload received. {e}"),
        })?;
        let name = sim.with(|w| w.insert(&project, &zone, q.get("requestId").cloned(), &body))?;
        op(sim, &name)
    })
    .await
}

async fn delete(
    State(sim): State<Sim>,
    Path((project, zone, name)): Path<(String, String, String)>,
    q: Params,
) -> Response {
    call(&sim, "compute.instances.delete", |sim| {
        let op_name = sim.with(|w| w.delete(&project, &zone, &name, q.get("requestId").cloned()))?;
        op(sim, &op_name)
    })
    .await
}

async fn get_instance(
    State(sim): State<Sim>,
    Path((project, zone, name)): Path<(String, String, String)>,
) -> Response {
    call(&sim, "compute.instances.get", |sim| sim.with(|w| w.get(&project, &zone, &name))).await
}

async fn list(State(sim): State<Sim>, Path((project, zone)): Path<(String, String)>, q: Params) -> Response {
    call(&sim, "compute.instances.list", |sim| {
        let invalid = |field: &str, msg: String| ApiError {
            status: 400,
            reason: "invalid",
            message: format!("Invalid value for field '{field}': {msg}"),
        };
        let filter = Filter::parse(q.get("filter").map(String::as_str).unwrap_or_default())
            .map_err(|e| invalid("filter", e))?;
        let max = match q.get("maxResults").filter(|m| !m.is_empty()) {
            None => 500,
            Some(m) => match m.parse::<usize>() {
                Ok(m) if m <= 500 => if m == 0 { 500 } else { m },
                _ => return Err(invalid("maxResults", format!("'{m}'. Must be between 0 and 500"))),
            },
        };
        let token = q.get("pageToken").filter(|t| !t.is_empty()).map(String::as_str);
        let (items, next) = sim.with(|w| w.list(&project, &zone, &filter, max, token))?;
        let mut v = json!({"kind": "compute#instanceList", "id": format!("projects/{project}/zones/{zone}/instances"),
                           "selfLink": url(&project, &format!("zones/{zone}/instances"))});
        if !items.is_empty() {
            v["items"] = json!(items);
        }
        if let Some(next) = next {
            v["nextPageToken"] = json!(next);
        }
        Ok(v)
    })
    .await
}

async fn get_operation(
    State(sim): State<Sim>,
    Path((project, zone, name)): Path<(String, String, String)>,
) -> Response {
    call(&sim, "compute.zoneOperations.get", |sim| {
        sim.with(|w| w.operation(&project, &zone, &name).map(|op| op.name.clone()))?;
        op(sim, &name)
    })
    .await
}

/// Blocks until the operation is DONE or `wait_max_ms` passed, then answers it.
async fn wait(
    State(sim): State<Sim>,
    Path((project, zone, name)): Path<(String, String, String)>,
) -> Response {
    let method = "compute.zoneOperations.wait";
    if let Some(fault) = sim.enter(method).await {
        return sim.answer(method, injected(&fault));
    }
    let deadline = Instant::now() + Duration::from_millis(sim.with(|w| w.cfg.wait_max_ms));
    loop {
        let state = sim.with(|w| w.operation(&project, &zone, &name).map(|op| op.status));
        match state {
            Err(e) => return sim.answer(method, error(e)),
            Ok(OpStatus::Done) => break,
            Ok(_) if Instant::now() >= deadline => break,
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let resp = match op(&sim, &name) {
        Ok(v) => Json(v).into_response(),
        Err(e) => error(e),
    };
    sim.answer(method, resp)
}

async fn zones(State(sim): State<Sim>, Path(project): Path<String>) -> Response {
    call(&sim, "compute.zones.list", |sim| {
        let items = sim.with(|w| w.zones(&project));
        Ok(json!({"kind": "compute#zoneList", "items": items, "selfLink": url(&project, "zones")}))
    })
    .await
}

/// Disk types every zone offers.
const DISK_TYPES: &[&str] = &[
    "pd-standard",
    "pd-balanced",
    "pd-ssd",
    "pd-extreme",
    "local-ssd",
    "hyperdisk-balanced",
    "hyperdisk-extreme",
    "hyperdisk-throughput",
];

async fn disk_types(State(sim): State<Sim>, Path((project, zone)): Path<(String, String)>) -> Response {
    call(&sim, "compute.diskTypes.list", |sim| {
        if !sim.with(|w| w.cfg.zones.contains(&zone)) {
            let message = format!("The resource 'projects/{project}/zones/{zone}' was not found");
            return Err(ApiError { status: 404, reason: "notFound", message });
        }
        let items: Vec<Value> = DISK_TYPES
            .iter()
            .map(|t| {
                json!({"kind": "compute#diskType", "name": t, "zone": url(&project, &format!("zones/{zone}")),
                       "selfLink": url(&project, &format!("zones/{zone}/diskTypes/{t}"))})
            })
            .collect();
        let link = url(&project, &format!("zones/{zone}/diskTypes"));
        Ok(json!({"kind": "compute#diskTypeList", "items": items, "selfLink": link}))
    })
    .await
}

async fn regions(State(sim): State<Sim>, Path(project): Path<String>) -> Response {
    call(&sim, "compute.regions.list", |sim| {
        let items = sim.with(|w| w.regions(&project));
        Ok(json!({"kind": "compute#regionList", "items": items, "selfLink": url(&project, "regions")}))
    })
    .await
}
