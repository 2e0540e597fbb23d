//! How a Compute Engine call is taken, for every Compute route: the rate quota and the faults on
//! entering it, a request body parsed and checked against Compute's schema, the handler, and the
//! answer counted; and Compute's error body, which every Compute refusal (a fault, a quota, an
//! unknown field, a missing token) is written in.

use std::collections::HashMap;

use axum::Json;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::handle::{Refused, Sim};
use crate::schema::{self, Body, Refusal};
use crate::world::{ApiError, Operation, World};

/// A call's query parameters.
pub(crate) type Params = Query<HashMap<String, String>>;

/// Compute Engine's error body: `{"error": {"code", "message", "errors": [{"message", "domain",
/// "reason"}]}}`, with the canonical `status` and the `details` when given.
pub(crate) fn error_body(e: &ApiError, status: Option<&str>, details: Option<Value>) -> Value {
    let mut body = json!({"error": {"code": e.status, "message": e.message,
        "errors": [{"message": e.message, "domain": "global", "reason": e.reason}]}});
    if let Some(s) = status {
        body["error"]["status"] = json!(s);
    }
    if let Some(d) = details {
        body["error"]["details"] = d;
    }
    body
}

/// The answer of `body` (an [`error_body`]) with `e`'s HTTP status.
pub(crate) fn answer_error(e: &ApiError, body: Value) -> Response {
    (StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), Json(body)).into_response()
}

/// An error as Compute answers it.
pub(crate) fn error(e: ApiError) -> Response {
    answer_error(&e, error_body(&e, None, None))
}

/// A body refused by the schema: 400 with every unknown field's line, the canonical status, and
/// a `BadRequest` with a field violation per field.
fn refusal(r: &Refusal) -> Response {
    let e = ApiError { status: 400, reason: "invalid", message: r.message() };
    answer_error(&e, refusal_body(r))
}

fn refusal_body(r: &Refusal) -> Value {
    let e = ApiError { status: 400, reason: "invalid", message: r.message() };
    let violations: Vec<Value> =
        r.unknown.iter().map(|u| json!({"field": u.path, "description": u.message()})).collect();
    let details =
        json!([{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": violations}]);
    error_body(&e, Some("INVALID_ARGUMENT"), Some(details))
}

/// The answer to a call refused on entering: an injected error, or a rate quota's.
pub(crate) fn refused(r: Refused) -> Response {
    error(match r {
        Refused::Quota(e) => e,
        Refused::Fault(f) => match f.status {
            429 => {
                ApiError { status: 429, reason: "rateLimitExceeded", message: "Rate Limit Exceeded".into() }
            }
            403 => {
                ApiError { status: 403, reason: "rateLimitExceeded", message: "Rate Limit Exceeded".into() }
            }
            _ => ApiError {
                status: 503,
                reason: "backendError",
                message: "Internal error. Please try again.".into(),
            },
        },
    })
}

/// Runs a handler body of `project`'s call of `method` after its rate quota and the faults,
/// and counts the answer.
pub(crate) async fn call(
    sim: &Sim,
    method: &str,
    project: &str,
    f: impl FnOnce(&Sim) -> Result<Value, ApiError>,
) -> Response {
    taken(sim, method, project, |sim| answer(f(sim))).await
}

/// As [`call`], with a request body (a `kind`): not JSON, a 400 `parseError`; a field Compute's
/// schema does not have, a 400 naming it ([`schema::Refusal`]); else `f` runs on it.
pub(crate) async fn call_body(
    sim: &Sim,
    method: &str,
    project: &str,
    kind: Body,
    body: &[u8],
    f: impl FnOnce(&Sim, &Value) -> Result<Value, ApiError>,
) -> Response {
    taken(sim, method, project, |sim| match json_body(body) {
        Err(e) => error(e),
        Ok(v) => match schema::check(kind, &v) {
            Err(r) => refusal(&r),
            Ok(()) => answer(f(sim, &v)),
        },
    })
    .await
}

/// `f`'s answer to `project`'s call of `method` once its rate quota and the faults let it in
/// (else theirs), counted.
async fn taken(sim: &Sim, method: &str, project: &str, f: impl FnOnce(&Sim) -> Response) -> Response {
    let resp = match sim.enter(method, Some(project)).await {
        Err(r) => refused(r),
        Ok(()) => f(sim),
    };
    sim.answer(method, resp)
}

fn answer(r: Result<Value, ApiError>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => error(e),
    }
}

/// A request body as JSON, or 400 `parseError`.
fn json_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError {
        status: 400,
        reason: "parseError",
        message: format!("Invalid JSON payload received. {e}"),
    })
}

/// A copy of the operation `name` (to encode once the world is unlocked).
pub(crate) fn copy_op(w: &World, name: &str) -> Result<Operation, ApiError> {
    w.operations.get(name).cloned().ok_or_else(|| ApiError {
        status: 500,
        reason: "internal",
        message: "lost operation".into(),
    })
}

#[cfg(test)]
mod tests;
