//! pRPC's JSON encoding as the Swarming routes answer it: a gRPC status and its HTTP status,
//! the success body (`)]}'` + newline + protojson), the failure body (text), a broken server's
//! answer, and the request parsing (JSON bodies, RFC 3339 timestamps).

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::config::ServerFault;
use crate::handle::HANG;

/// A gRPC status: code and message.
pub(crate) struct Status(pub(crate) u16, pub(crate) String);

/// The HTTP status pRPC answers a gRPC code with.
pub(crate) fn http_of(code: u16) -> StatusCode {
    match code {
        0 => StatusCode::OK,
        1 => StatusCode::from_u16(499).expect("valid"),
        3 | 9 => StatusCode::BAD_REQUEST,
        4 => StatusCode::GATEWAY_TIMEOUT,
        5 => StatusCode::NOT_FOUND,
        6 => StatusCode::CONFLICT,
        7 => StatusCode::FORBIDDEN,
        8 => StatusCode::TOO_MANY_REQUESTS,
        12 => StatusCode::NOT_IMPLEMENTED,
        14 => StatusCode::SERVICE_UNAVAILABLE,
        16 => StatusCode::UNAUTHORIZED,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A success answer of `v`.
pub(crate) fn ok(v: Value) -> Response {
    let body = format!(")]}}'\n{v}\n");
    (
        StatusCode::OK,
        [
            ("x-prpc-grpc-code", "0"),
            (header::CONTENT_TYPE.as_str(), "application/json"),
            ("x-content-type-options", "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// The answer of a failure.
pub(crate) fn fail(Status(code, message): Status) -> Response {
    let message = if code == 13 || code == 2 { "Internal server error".to_owned() } else { message };
    (
        http_of(code),
        [
            ("x-prpc-grpc-code", code.to_string()),
            (header::CONTENT_TYPE.as_str(), "text/plain; charset=utf-8".into()),
        ],
        format!("{message}\n"),
    )
        .into_response()
}

/// The answer of a broken server: after [`HANG`] (the world is not locked meanwhile), or at once a
/// success whose body is cut short.
pub(crate) async fn broken(fault: ServerFault) -> Response {
    match fault {
        ServerFault::Hang => {
            tokio::time::sleep(HANG).await;
            fail(Status(4, "deadline exceeded".into()))
        }
        ServerFault::Malformed => (
            StatusCode::OK,
            [("x-prpc-grpc-code", "0"), (header::CONTENT_TYPE.as_str(), "application/json")],
            ")]}'\n{\"items\": [{\"botId\": \"",
        )
            .into_response(),
    }
}

/// The request message of `body` (empty: the defaults), or INVALID_ARGUMENT.
pub(crate) fn parse<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, Status> {
    if body.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| Status(3, format!("bad request: {e}")))
}

/// An optional RFC 3339 timestamp field, or INVALID_ARGUMENT.
pub(crate) fn time(s: &Option<String>, field: &str) -> Result<Option<DateTime<Utc>>, Status> {
    match s {
        None => Ok(None),
        Some(s) => DateTime::parse_from_rfc3339(s)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|_| Status(3, format!("{field}: not an RFC 3339 timestamp: {s}"))),
    }
}

/// Swarming's timestamp form: `2024-05-06T07:08:09.123456Z`.
pub(crate) fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}
