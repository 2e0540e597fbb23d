//! pRPC's encoding as luci-go's server answers: every gRPC code's HTTP status, the hidden
//! messages, gzip past the threshold, `Accept-Encoding` parsing, protojson timestamps.

use std::io::Read as _;

use axum::http::HeaderValue;
use chrono::TimeZone as _;
use serde_json::json;

use super::*;

async fn parts(resp: Response) -> (u16, HeaderMap, Vec<u8>) {
    let (head, body) = resp.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    (head.status.as_u16(), head.headers, body.to_vec())
}

fn gunzip(b: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::GzDecoder::new(b).read_to_string(&mut out).unwrap();
    out
}

#[tokio::test]
async fn every_code_has_luci_gos_http_status_and_5xx_messages_are_hidden() {
    // (code, HTTP status, body): grpcutil's codeToStatus, prpc's writeError.
    let table = [
        (1, 499, "the message"),
        (2, 500, "Unknown server error"),
        (3, 400, "the message"),
        (4, 504, "Request deadline exceeded"),
        (5, 404, "the message"),
        (6, 409, "the message"),
        (7, 403, "the message"),
        (8, 429, "the message"),
        (9, 400, "the message"),
        (10, 409, "the message"),
        (11, 400, "the message"),
        (12, 501, "API method not implemented by the server"),
        (13, 500, "Internal server error"),
        (14, 503, "Service unavailable"),
        (15, 500, "Unrecoverable data loss or data corruption"),
        (16, 401, "the message"),
        (17, 500, "Server error"),
    ];
    assert_eq!(http_of(0), StatusCode::OK);
    for (code, status, text) in table {
        let (st, headers, body) = parts(fail(Status(code, "the message".into()))).await;
        assert_eq!(st, status, "code {code}");
        assert_eq!(headers["x-prpc-grpc-code"], code.to_string().as_str());
        assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(String::from_utf8(body).unwrap(), format!("{text}\n"), "code {code}");
    }
}

#[tokio::test]
async fn answers_past_1024_bytes_are_gzipped_for_callers_that_accept_it() {
    // The body is `)]}'\n` + JSON + `\n`: 5 + 1 bytes around the JSON.
    let of_len = |n: usize| json!({"s": "x".repeat(n - 6 - r#"{"s":""}"#.len())});
    let at = of_len(GZIP_THRESHOLD);
    let (_, headers, body) = parts(ok(at.clone(), true)).await;
    assert_eq!(body.len(), GZIP_THRESHOLD);
    assert!(headers.get("content-encoding").is_none(), "1024 bytes are not compressed");

    let over = of_len(GZIP_THRESHOLD + 1);
    let (st, headers, body) = parts(ok(over.clone(), true)).await;
    assert_eq!(st, 200);
    assert_eq!(headers["content-encoding"], "gzip");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["x-prpc-grpc-code"], "0");
    assert_eq!(gunzip(&body), format!(")]}}'\n{over}\n"));

    let (_, headers, body) = parts(ok(over.clone(), false)).await;
    assert!(headers.get("content-encoding").is_none(), "not asked for");
    assert_eq!(String::from_utf8(body).unwrap(), format!(")]}}'\n{over}\n"));
}

#[test]
fn accept_encoding_is_read_as_luci_go_reads_it() {
    let with = |v: &str| {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
        accepts_gzip(&h).map_err(|Status(code, m)| (code, m))
    };
    assert_eq!(accepts_gzip(&HeaderMap::new()).ok(), Some(false));
    assert_eq!(with("gzip").ok(), Some(true));
    assert_eq!(with("deflate, GZIP;q=0.5").ok(), Some(true));
    assert_eq!(with("gzip;q=0").ok(), Some(true), "the quality is not weighed");
    assert_eq!(with("br, deflate").ok(), Some(false));
    assert_eq!(with("gzip;level=1").ok(), Some(false), "a parameter other than q stays in the value");
    assert_eq!(
        with("gzip;q=high").unwrap_err(),
        (3, "bad Accept header: q parameter: expected a floating-point number".to_owned())
    );
}

#[test]
fn timestamps_have_0_3_6_or_9_fractional_digits_the_fewest_that_are_exact() {
    let at = |nanos: u32| {
        Utc.with_ymd_and_hms(2024, 5, 6, 7, 8, 9).unwrap() + chrono::Duration::nanoseconds(nanos.into())
    };
    assert_eq!(ts(at(0)), "2024-05-06T07:08:09Z");
    assert_eq!(ts(at(120_000_000)), "2024-05-06T07:08:09.120Z");
    assert_eq!(ts(at(123_400_000)), "2024-05-06T07:08:09.123400Z");
    assert_eq!(ts(at(123_456_000)), "2024-05-06T07:08:09.123456Z");
    assert_eq!(ts(at(123_456_789)), "2024-05-06T07:08:09.123456789Z");
    assert_eq!(ts(at(1)), "2024-05-06T07:08:09.000000001Z");
    assert_eq!(
        ts(stored(at(123_456_789))),
        "2024-05-06T07:08:09.123456Z",
        "the datastore keeps microseconds"
    );
}
