//! pRPC's JSON encoding as luci-go's pRPC server answers it (`grpc/prpc`): a gRPC status and its
//! HTTP status, the message hidden behind a generic one for server errors, the success body
//! (`)]}'` + newline + protojson, gzip-compressed when the caller accepts it and it is large), the
//! failure body (text), a broken server's answer, and the request parsing (JSON bodies, RFC 3339
//! timestamps) and protojson's timestamp form.

use std::io::Write as _;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Timelike as _, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::config::ServerFault;
use crate::handle::HANG;

/// A gRPC status: code and message.
pub(crate) struct Status(pub(crate) u16, pub(crate) String);

/// Bodies larger than this many bytes (prefix included) are compressed for a caller that accepts
/// gzip (luci-go's `gzipThreshold`).
pub(crate) const GZIP_THRESHOLD: usize = 1024;

/// The HTTP status pRPC answers a gRPC code with (luci-go's `grpcutil.CodeStatus`: a code it does
/// not know is 500).
pub(crate) fn http_of(code: u16) -> StatusCode {
    let status = match code {
        0 => 200,
        1 => 499,
        3 | 9 | 11 => 400,
        4 => 504,
        5 => 404,
        6 | 10 => 409,
        7 => 403,
        8 => 429,
        12 => 501,
        14 => 503,
        16 => 401,
        _ => 500, // 2 UNKNOWN, 13 INTERNAL, 15 DATA_LOSS and codes past 16
    };
    StatusCode::from_u16(status).expect("valid HTTP status")
}

/// The text sent in place of the message of a status answered with HTTP 5xx (the server's own
/// errors, whose messages may hold private details); `None`: the message is sent as it is.
pub(crate) fn hidden(code: u16) -> Option<&'static str> {
    if http_of(code).as_u16() < 500 {
        return None;
    }
    Some(match code {
        15 => "Unrecoverable data loss or data corruption",
        2 => "Unknown server error",
        13 => "Internal server error",
        12 => "API method not implemented by the server",
        14 => "Service unavailable",
        4 => "Request deadline exceeded",
        _ => "Server error",
    })
}

/// Whether the request's `Accept-Encoding` lists `gzip` (any quality, as luci-go reads it), or
/// INVALID_ARGUMENT for a quality that is not a number.
pub(crate) fn accepts_gzip(headers: &HeaderMap) -> Result<bool, Status> {
    let mut gzip = false;
    for v in headers.get_all(header::ACCEPT_ENCODING) {
        let v = String::from_utf8_lossy(v.as_bytes());
        for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (value, q) = q_split(item);
            if let Some(q) = q
                && q.parse::<f32>().is_err()
            {
                return Err(Status(
                    3,
                    "bad Accept header: q parameter: expected a floating-point number".into(),
                ));
            }
            gzip |= value.eq_ignore_ascii_case("gzip");
        }
    }
    Ok(gzip)
}

/// Splits an `Accept-Encoding` item into its value (all before the `;` of its `q` parameter, or
/// the whole item) and that parameter's value.
fn q_split(item: &str) -> (&str, Option<&str>) {
    let mut at = 0;
    while let Some(i) = item[at..].find(';').map(|i| at + i) {
        at = i + 1;
        let rest = item[at..].trim_start();
        let Some(rest) = rest.strip_prefix(['q', 'Q']).map(str::trim_start) else { continue };
        let Some(rest) = rest.strip_prefix('=').map(str::trim_start) else { continue };
        if rest.is_empty() {
            continue;
        }
        let q = rest.split(';').next().unwrap_or_default().trim_end();
        return (&item[..i], Some(q));
    }
    (item, None)
}

/// A success answer of `v`, gzip-compressed if `gzip` (the caller accepts it) and the body is
/// larger than [`GZIP_THRESHOLD`].
pub(crate) fn ok(v: Value, gzip: bool) -> Response {
    let body = format!(")]}}'\n{v}\n").into_bytes();
    let compress = gzip && body.len() > GZIP_THRESHOLD;
    let body = if compress { gzipped(&body) } else { body };
    let mut resp = (
        StatusCode::OK,
        [
            ("x-prpc-grpc-code", "0"),
            (header::CONTENT_TYPE.as_str(), "application/json"),
            ("x-content-type-options", "nosniff"),
        ],
        body,
    )
        .into_response();
    if compress {
        resp.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    resp
}

/// `body` gzip-compressed.
fn gzipped(body: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(body).and_then(|()| z.finish()).expect("gzip into memory cannot fail")
}

/// The answer of a failure: the code's HTTP status, its message (or the generic text of
/// [`hidden`]) and a newline.
pub(crate) fn fail(Status(code, message): Status) -> Response {
    let message = hidden(code).map_or(message, str::to_owned);
    (
        http_of(code),
        [
            ("x-prpc-grpc-code", code.to_string()),
            (header::CONTENT_TYPE.as_str(), "text/plain; charset=utf-8".into()),
            ("x-content-type-options", "nosniff".into()),
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

/// A `google.protobuf.Timestamp` as protojson writes it: UTC (`Z`), with 0, 3, 6 or 9 fractional
/// digits, the fewest that show the value exactly (`2024-05-06T07:08:09.120Z`).
pub(crate) fn ts(t: DateTime<Utc>) -> String {
    let nanos = t.nanosecond() % 1_000_000_000; // a leap second's nanos count from 1e9
    let frac = if nanos == 0 {
        String::new()
    } else if nanos.is_multiple_of(1_000_000) {
        format!(".{:03}", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        format!(".{:06}", nanos / 1_000)
    } else {
        format!(".{nanos:09}")
    };
    format!("{}{frac}Z", t.format("%Y-%m-%dT%H:%M:%S"))
}

/// `t` as the datastore keeps it (Swarming's bots and events are stored there): to the
/// microsecond, the rest dropped.
pub(crate) fn stored(t: DateTime<Utc>) -> DateTime<Utc> {
    t.with_nanosecond(t.nanosecond() / 1_000 * 1_000).unwrap_or(t)
}

#[cfg(test)]
mod tests;
