//! The API's one error shape, `{code, message, requestId}`, for every 4xx and 5xx: the errors
//! handlers return, the request ids they carry, and the rewrite of any other error response
//! (unknown route, wrong method, body too large, a caught panic) into that shape.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gce_backend_jobs::config::ConfigError;
use gce_backend_jobs::operate::OpError;
use rand::Rng;
use schemars::JsonSchema;
use serde::Serialize;

tokio::task_local! {
    static REQUEST_ID: String;
}

/// Header carrying the request id on every response.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// An error as the API answers it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// Stable code: `InvalidInput`, `AuthenticationFailed`, `InsufficientRole`,
    /// `ResourceNotFound`, `RequestConflict`, `MethodNotAllowed`, `PayloadTooLarge`,
    /// `TooManyRequests` (with `Retry-After`), `Unavailable`, `InternalError`.
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
    /// The request's id (also in the `x-request-id` header), to find it in the logs.
    pub request_id: String,
    /// For `InvalidInput` of a Config: every broken rule, each naming its field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldError>,
}

/// One broken rule of an input.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct FieldError {
    /// Path of the field, e.g. `linux.attributes.zone`.
    pub field: String,
    /// The rule it breaks.
    pub rule: String,
}

/// An error a handler returns.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    fields: Vec<FieldError>,
}

impl ApiError {
    /// An error with this status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), fields: Vec::new() }
    }

    /// 400: the input is wrong.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404, worded the same whether the thing is missing or hidden from the caller.
    pub fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("no {what} found, or the caller may not read it"))
    }

    /// 403: the caller's role or groups do not allow it.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, message)
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

/// The code of a status, in the one place that names them.
fn code(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 422 | 415 => "InvalidInput",
        401 => "AuthenticationFailed",
        403 => "InsufficientRole",
        404 => "ResourceNotFound",
        405 => "MethodNotAllowed",
        409 => "RequestConflict",
        413 => "PayloadTooLarge",
        429 => "TooManyRequests",
        408 | 503 | 504 => "Unavailable",
        _ => "InternalError",
    }
}

impl From<OpError> for ApiError {
    fn from(e: OpError) -> Self {
        match e {
            OpError::NotFound(what) => ApiError::not_found(&what),
            OpError::Invalid(errors) => invalid_config(errors),
            OpError::Conflict(message) => ApiError::new(StatusCode::CONFLICT, message),
            OpError::Task(t) if t.class() == gce_backend_jobs::error::Class::Transient => {
                tracing::warn!(error = %t, "API call met a transient error");
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("try again: {t}"))
            }
            OpError::Task(t) => {
                tracing::error!(error = %t, "API call failed");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, t.to_string())
            }
        }
    }
}

impl From<gce_backend_jobs::error::TaskError> for ApiError {
    fn from(e: gce_backend_jobs::error::TaskError) -> Self {
        OpError::Task(e).into()
    }
}

impl From<gce_backend_queues::QueueError> for ApiError {
    fn from(e: gce_backend_queues::QueueError) -> Self {
        gce_backend_jobs::error::TaskError::Queue(e).into()
    }
}

/// 400 listing every broken rule of a Config.
pub fn invalid_config(errors: Vec<ConfigError>) -> ApiError {
    let mut e = ApiError::invalid(match errors.as_slice() {
        [one] => format!("invalid Config: {one}"),
        many => format!("invalid Config: {} rules broken (see fields)", many.len()),
    });
    e.fields = errors.into_iter().map(|c| FieldError { field: c.field, rule: c.rule }).collect();
    e
}

fn body(status: StatusCode, message: String, fields: Vec<FieldError>) -> Response {
    let request_id = REQUEST_ID.try_with(String::clone).unwrap_or_default();
    let b = ErrorBody { code: code(status).to_owned(), message, request_id, fields };
    (status, axum::Json(b)).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        body(self.status, self.message, self.fields)
    }
}

/// Gives each request a random id (task-local for error bodies, and in the response header),
/// and rewrites every error response that is not already ours into `{code, message, requestId}`.
pub async fn errors(req: Request, next: Next) -> Response {
    let id = format!("{:016x}", rand::rng().random::<u64>());
    let mut res = REQUEST_ID
        .scope(id.clone(), async move {
            let res = next.run(req).await;
            let ours = res.headers().get(header::CONTENT_TYPE).is_some_and(|v| v == "application/json");
            if res.status().as_u16() < 400 || ours {
                return res;
            }
            let status = res.status();
            let text = axum::body::to_bytes(res.into_body(), 4096).await.unwrap_or_default();
            let mut message = String::from_utf8_lossy(&text).trim().to_owned();
            if message.is_empty() {
                message = status.canonical_reason().unwrap_or("error").to_owned();
            }
            body(status, message, Vec::new())
        })
        .await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
    res
}

/// What a caught panic answers (the panic itself is logged).
pub fn panicked(err: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    let what = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied())
        .unwrap_or("panic");
    tracing::error!(panic = what, "API handler panicked");
    let mut res = Response::new(Body::from("internal error"));
    *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    res
}
