//! Swarming pRPC as luci-go's pRPC server and Swarming answer it: the HTTP status of each code,
//! the hidden messages of server errors, protojson timestamps, opaque ListBots cursors,
//! TerminateBot's reason in bytes, page sizes up to 1000 and gzip past 1 KiB, and our client's
//! style of call (reqwest with gzip) reading the pages.

use std::io::Read as _;
use std::time::Duration;

use gce_backend_sim::Sim;
use serde_json::{Value, json};

use crate::support::{SimHandle, eventually, quick, start_with_world};

const S: &str = "swarm.example.com";

/// A simulator with `n` running instances, bots `vm-0000`… connected to [`S`].
async fn fleet(n: usize) -> (SimHandle, Sim) {
    let (s, sim) = start_with_world(quick()).await;
    sim.with(|w| {
        for k in 0..n {
            let body = json!({"name": format!("vm-{k:04}"), "machineType": "e2-small",
                              "metadata": {"items": [{"key": "swarming-server", "value": format!("https://{S}")}]}});
            w.insert("proj", "us-central1-b", None, &body).unwrap();
        }
    });
    eventually("the bots connect", Duration::from_secs(20), || async {
        let c = s.prpc(S, "CountBots", json!({})).await.ok()?;
        (c["count"] == n).then_some(())
    })
    .await;
    (s, sim)
}

/// A raw answer: HTTP status, headers, body as sent (not decompressed).
struct Raw {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }

    /// The JSON of a success, decompressed if it was sent gzipped.
    fn json(&self) -> Value {
        let text = if self.header("content-encoding") == Some("gzip") {
            let mut out = String::new();
            flate2::read::GzDecoder::new(self.body.as_slice()).read_to_string(&mut out).unwrap();
            out
        } else {
            self.text()
        };
        serde_json::from_str(text.strip_prefix(")]}'\n").expect("the pRPC prefix")).unwrap()
    }
}

/// Calls `swarming.v2.Bots/<method>` on [`S`] with no automatic decompression, with
/// `Accept-Encoding` if given.
async fn raw(s: &SimHandle, method: &str, body: Value, accept_encoding: Option<&str>) -> Raw {
    let http = reqwest::Client::builder().no_gzip().build().unwrap();
    let mut r = http
        .post(format!("{}/swarming/{S}/prpc/swarming.v2.Bots/{method}", s.base))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body.to_string());
    if let Some(e) = accept_encoding {
        r = r.header("accept-encoding", e);
    }
    let r = r.send().await.unwrap();
    Raw { status: r.status().as_u16(), headers: r.headers().clone(), body: r.bytes().await.unwrap().to_vec() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_answer_luci_gos_status_and_hide_their_message() {
    let (s, _sim) = fleet(1).await;
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
    let (s, _sim) = fleet(1).await;
    let mut digits = Vec::new();
    for _ in 0..3 {
        let page = s.prpc(S, "ListBots", json!({})).await.unwrap();
        let now = page["now"].as_str().unwrap();
        assert!(protojson_ts(now), "{now}");
        digits.push(now.split_once('.').map_or(0, |(_, f)| f.len() - 1));
        for field in ["firstSeenTs", "lastSeenTs"] {
            let t = page["items"][0][field].as_str().unwrap();
            assert!(protojson_ts(t) && t.len() <= "2024-05-06T07:08:09.123456Z".len(), "{field}: {t}");
        }
    }
    assert!(digits.contains(&9), "the clock's nanoseconds are shown: {digits:?}");
    let events = s.prpc(S, "ListBotEvents", json!({"botId": "vm-0000"})).await.unwrap();
    let t = events["items"][0]["ts"].as_str().unwrap();
    assert!(protojson_ts(t), "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_bots_cursors_are_opaque_refused_unless_issued_and_page_stably() {
    let (s, _sim) = fleet(5).await;
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
    let (s, _sim) = fleet(2).await;
    let call = |id: &str, reason: String| s.prpc(S, "TerminateBot", json!({"botId": id, "reason": reason}));
    let (code, text) = call("vm-0000", "é".repeat(501)).await.unwrap_err();
    assert_eq!((code, text.as_str()), (3, "reason is too long: 1002 > 1000\n"), "501 characters, 1002 bytes");
    assert!(call("vm-0000", "é".repeat(500)).await.unwrap()["taskId"].is_string(), "1000 bytes");
    assert!(call("vm-0001", "x".repeat(1000)).await.is_ok());
    assert_eq!(call("vm-0001", "x".repeat(1001)).await.unwrap_err().0, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_bots_pages_up_to_1000_and_gzips_answers_past_1_kib() {
    let (s, _sim) = fleet(520).await;
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
    assert!(plain.body.len() > 10 * r.body.len(), "{} bytes, {} gzipped", plain.body.len(), r.body.len());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_clients_style_of_call_reads_gzipped_pages() {
    let (s, _sim) = fleet(520).await;
    // As src/adapters/swarming.rs builds its client, with reqwest's gzip feature on: it asks for
    // gzip and decodes the answer.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut ids = Vec::new();
    let mut cursor = String::new();
    loop {
        let resp = http
            .post(format!("{}/swarming/{S}/prpc/swarming.v2.Bots/ListBots", s.base))
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(json!({"limit": 500, "cursor": cursor}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers()["x-prpc-grpc-code"], "0");
        let text = resp.text().await.unwrap();
        let page: Value = serde_json::from_str(text.strip_prefix(")]}'").unwrap()).unwrap();
        ids.extend(page["items"].as_array().unwrap().iter().map(|b| b["botId"].as_str().unwrap().to_owned()));
        match page["cursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(ids, (0..520).map(|k| format!("vm-{k:04}")).collect::<Vec<_>>());
}
