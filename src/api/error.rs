//! The API's one error shape, `{code, message, requestId}`, for every 4xx and 5xx: the errors
//! handlers return, the request ids they carry, and the rewrite of any other error response
//! (unknown route, wrong method, body too large, a caught panic) into that shape.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gce_backend_jobs::config::ConfigError;
use gce_backend_jobs::model::FileError;
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
    /// Stable code, one per kind of status (see [`ERRORS`]): `InvalidInput`,
    /// `AuthenticationFailed`, `InsufficientRole`, `ResourceNotFound`, `RequestConflict`,
    /// `MethodNotAllowed`, `PayloadTooLarge`, `TooManyRequests` (with `Retry-After`),
    /// `Unavailable`, `InternalError`.
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
    /// The request's id (also in the `x-request-id` header), to find it in the logs.
    pub request_id: String,
    /// For `InvalidInput` of a Config: every broken rule, each naming its field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldError>,
    /// For `ResourceNotFound` of a Config whose file is not applied: that file's errors (the
    /// ones the caller may read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileError>,
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
    files: Vec<FileError>,
}

impl ApiError {
    /// An error with this status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), fields: Vec::new(), files: Vec::new() }
    }

    /// 400: the input is wrong.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404, worded the same whether the thing is missing or hidden from the caller.
    pub fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("no {what} found, or the caller may not read it"))
    }

    /// 404 for a Config that does not exist because its file is not applied: the file's errors
    /// (`files`, not empty) say why.
    pub fn not_applied(prefix: &str, files: Vec<FileError>) -> Self {
        let paths: std::collections::BTreeSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
        let paths: Vec<&str> = paths.into_iter().collect();
        let mut e = Self::new(
            StatusCode::NOT_FOUND,
            format!("no Config {prefix:?}: its file {} is not applied (see files)", paths.join(", ")),
        );
        e.files = files;
        e
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

/// Every status an error answer may have, with its stable code and what it means: the one list
/// (the codes answered, and the OpenAPI document's error responses, come from it).
pub const ERRORS: &[(u16, &str, &str)] = &[
    (
        400,
        "InvalidInput",
        "A route parameter, the query or the body is wrong; `fields` names each broken rule of a Config.",
    ),
    (401, "AuthenticationFailed", "No token, or one that is unknown or has expired."),
    (
        403,
        "InsufficientRole",
        "The caller's role or groups do not allow it; for `register`, the identity proof is refused.",
    ),
    (404, "ResourceNotFound", "No such thing, or the caller may not read it (worded the same)."),
    (405, "MethodNotAllowed", "The route has no method with this verb."),
    (408, "Unavailable", "The request did not arrive in time."),
    (
        409,
        "RequestConflict",
        "It conflicts with the records: held by a Config file or another Config, changed meanwhile, or corrupt.",
    ),
    (413, "PayloadTooLarge", "The body is larger than the API takes."),
    (415, "InvalidInput", "The body is not JSON."),
    (422, "InvalidInput", "The body is JSON but not the method's input."),
    (
        429,
        "TooManyRequests",
        "The caller's or its address's rate is used up; `Retry-After` says when to come back.",
    ),
    (500, "InternalError", "The service failed; the request id finds it in the logs."),
    (503, "Unavailable", "The datastore did not answer in time, or a transient failure: try again."),
];

/// The code and meaning of an error status, from [`ERRORS`] (`InternalError` for one not listed).
pub fn described(status: u16) -> (&'static str, &'static str) {
    ERRORS.iter().find(|e| e.0 == status).map_or(("InternalError", ""), |e| (e.1, e.2))
}

/// The code of a status.
fn code(status: StatusCode) -> &'static str {
    described(status.as_u16()).0
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

impl From<gce_backend_jobs::ports::store::StoreError> for ApiError {
    fn from(e: gce_backend_jobs::ports::store::StoreError) -> Self {
        gce_backend_jobs::error::TaskError::from(e).into()
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let request_id = REQUEST_ID.try_with(String::clone).unwrap_or_default();
        let ApiError { status, message, fields, files } = self;
        let b = ErrorBody { code: code(status).to_owned(), message, request_id, fields, files };
        (status, axum::Json(b)).into_response()
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
            ApiError::new(status, message).into_response()
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
