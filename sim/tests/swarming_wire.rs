//! Swarming pRPC as luci-go's pRPC server and Swarming answer it: the HTTP status of each code,
//! the hidden messages of server errors, protojson timestamps, opaque ListBots cursors,
//! TerminateBot's reason in bytes, page sizes up to 1000 and gzip past 1 KiB.

use serde_json::{Value, json};

use crate::support::{Raw, SWARMING as S, SimHandle, fleet, quick, start};

/// Calls `swarming.v2.Bots/<method>` on [`S`], with `Accept-Encoding` if given: the answer as sent.
async fn raw(s: &SimHandle, method: &str, body: Value, accept_encoding: Option<&str>) -> Raw {
    s.prpc_raw(S, "swarming.v2.Bots", method, body, accept_encoding).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_answer_luci_gos_status_and_hide_their_message() {
    let s = start(quick()).await;
    let r = raw(&s, "GetBotDimensions", json!({}), None).await;
    assert_eq!((r.status, r.header("x-prpc-grpc-code")), (501, Some("12")));
    assert_eq!(r.text(), "API method not implemented by the server\n");

    s.admin_post("/sim/faults", json!({"errors": {"swarming.GetBot": {"rate": 1.0, "status": 503}}})).await;
    let r = raw(&s, "GetBot", json!({"botId": "vm-0000"}), None).await;
    assert_eq!((r.status, r.header("x-prpc-grpc-code")), (503, Some("14")));
    assert_eq!(r.text(), "Service unavailable\n");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));

    s.admin_post("/sim/faults", json!({"errors": {"swarming.GetBot": {"rate": 1.0, "status": 403}}})).await;
    let r = raw(&s, "GetBot", json!({"botId": "vm-0000"}), None).await;
    assert_eq!((r.status, r.header("x-prpc-grpc-code")), (403, Some("7")));
    assert_eq!(r.text(), "permission denied (injected fault)\n", "a 4xx keeps its message");
}

/// Whether `t` is a protojson timestamp: UTC, 0, 3, 6 or 9 fractional digits, the fewest exact.
fn protojson_ts(t: &str) -> bool {
    let Some(rest) = t.strip_suffix('Z') else { return false };
    let frac = rest.split_once('.').map_or("", |(_, f)| f);
    chrono::DateTime::parse_from_rfc3339(t).is_ok()
        && matches!(frac.len(), 0 | 3 | 6 | 9)
        && !frac.ends_with("000")
        && frac.bytes().all(|b| b.is_ascii_digit())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_are_written_as_protojson_writes_them() {
    let (s, _sim) = fleet(1, &["us-central1-b"]).await;
    for _ in 0..3 {
        let page = s.prpc(S, "ListBots", json!({})).await.unwrap();
        let now = page["now"].as_str().unwrap();
        assert!(protojson_ts(now), "{now}");
        for field in ["firstSeenTs", "lastSeenTs"] {
            let t = page["items"][0][field].as_str().unwrap();
            assert!(protojson_ts(t) && t.len() <= "2024-05-06T07:08:09.123456Z".len(), "{field}: {t}");
        }
    }
    let events = s.prpc(S, "ListBotEvents", json!({"botId": "vm-0000"})).await.unwrap();
    let t = events["items"][0]["ts"].as_str().unwrap();
    assert!(protojson_ts(t), "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_bots_cursors_are_opaque_refused_unless_issued_and_page_stably() {
    let (s, _sim) = fleet(5, &["us-central1-b"]).await;
    let first = s.prpc(S, "ListBots", json!({"limit": 2})).await.unwrap();
    let cursor = first["cursor"].as_str().unwrap().to_owned();
    assert!(!cursor.contains("vm-"), "not the last bot id: {cursor}");

    for bad in ["vm-0001", "bogus", &format!("{cursor}x")] {
        let r = raw(&s, "ListBots", json!({"limit": 2, "cursor": bad}), None).await;
        assert_eq!((r.status, r.header("x-prpc-grpc-code")), (400, Some("3")), "{bad}");
        assert_eq!(r.text(), "bad pagination cursor\n");
    }
    let other = s.prpc("other.example.com", "ListBots", json!({"limit": 2, "cursor": cursor})).await;
    assert_eq!(other.unwrap_err(), (3, "bad pagination cursor\n".to_owned()), "another server's cursor");

    // The page's last bot goes: the cursor still resumes after it.
    s.prpc(S, "DeleteBot", json!({"botId": "vm-0001"})).await.unwrap();
    let mut ids = Vec::new();
    let mut cursor = Some(cursor);
    while let Some(c) = cursor {
        let page = s.prpc(S, "ListBots", json!({"limit": 2, "cursor": c})).await.unwrap();
        ids.extend(
            page["items"].as_array().into_iter().flatten().map(|b| b["botId"].as_str().unwrap().to_owned()),
        );
        cursor = page["cursor"].as_str().map(str::to_owned);
    }
    assert_eq!(ids, ["vm-0002", "vm-0003", "vm-0004"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_bot_counts_its_reason_in_bytes() {
    let (s, _sim) = fleet(2, &["us-central1-b"]).await;
    let call = |id: &str, reason: String| s.prpc(S, "TerminateBot", json!({"botId": id, "reason": reason}));
    let (code, text) = call("vm-0000", "é".repeat(501)).await.unwrap_err();
    assert_eq!((code, text.as_str()), (3, "reason is too long: 1002 > 1000\n"), "501 characters, 1002 bytes");
    assert!(call("vm-0000", "é".repeat(500)).await.unwrap()["taskId"].is_string(), "1000 bytes");
    assert!(call("vm-0001", "x".repeat(1000)).await.is_ok());
    assert_eq!(call("vm-0001", "x".repeat(1001)).await.unwrap_err().0, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_bots_pages_up_to_1000_and_gzips_answers_past_1_kib() {
    let (s, _sim) = fleet(520, &["us-central1-b"]).await;
    for (limit, text) in [
        (1001, "invalid limit: must be less or equal to 1000, got 1001\n"),
        (-1, "invalid limit: must be positive, got -1\n"),
    ] {
        let r = raw(&s, "ListBots", json!({"limit": limit}), Some("gzip")).await;
        assert_eq!((r.status, r.header("x-prpc-grpc-code")), (400, Some("3")));
        assert_eq!(r.header("content-encoding"), None, "errors are not compressed");
        assert_eq!(r.text(), text);
    }
    assert_eq!(
        s.prpc(S, "ListBots", json!({"limit": 1000})).await.unwrap()["items"].as_array().unwrap().len(),
        520
    );

    // LUCI's GCE Provider's page: 500 bots, gzipped.
    let r = raw(&s, "ListBots", json!({"limit": 500}), Some("deflate, gzip")).await;
    assert_eq!((r.status, r.header("content-encoding")), (200, Some("gzip")));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.body.starts_with(&[0x1f, 0x8b]), "a gzip stream");
    let page = r.json();
    assert_eq!(page["items"].as_array().unwrap().len(), 500);
    let plain = raw(&s, "ListBots", json!({"limit": 500}), None).await;
    assert_eq!(plain.header("content-encoding"), None, "not asked for");
    let ids =
        |v: &Value| v["items"].as_array().unwrap().iter().map(|b| b["botId"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&plain.json()), ids(&page), "the same page");

    let next = raw(&s, "ListBots", json!({"limit": 500, "cursor": page["cursor"]}), Some("gzip")).await;
    assert_eq!(next.json()["items"].as_array().unwrap().len(), 20);
    assert!(next.json().get("cursor").is_none());

    let small = raw(&s, "GetBot", json!({"botId": "vm-0000"}), Some("gzip")).await;
    assert!(small.body.len() <= 1024 && small.header("content-encoding").is_none(), "{}", small.text());
    assert_eq!(small.json()["botId"], "vm-0000");
}
