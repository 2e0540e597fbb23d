//! What a client meets when it gets things wrong or the datastore is away: every error is JSON
//! `{code, message, requestId}` (unknown route, wrong verb, a body too large, bad JSON, a bad
//! query), and `/readyz` says whether Redis answers while `/healthz` stays up.

use serde_json::{Value, json};

use super::{ADMIN, Client};
use crate::support::{Backend, Env, sim_config};

async fn raw(req: reqwest::RequestBuilder) -> (u16, Value, Option<String>) {
    answer(req.send().await.unwrap()).await
}

/// A response's status, JSON body and request id.
async fn answer(res: reqwest::Response) -> (u16, Value, Option<String>) {
    let status = res.status().as_u16();
    let id = res.headers().get("x-request-id").map(|v| v.to_str().unwrap().to_owned());
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("{status}: not JSON: {text}")), id)
}

/// Sends a PUT announcing a 2 MiB body without sending it; returns the answer's status and body.
async fn announce_too_much(url: &str, path: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "PUT {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        2 << 20
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), conn.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body.trim()).unwrap_or_else(|_| panic!("not JSON: {text}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_json_and_readyz_follows_redis() {
    let mut env = Env::start(Backend::Redis, sim_config(), &[], false).await;
    let url = super::serve(env.ctx.clone()).await;
    let api = Client::new(&url).await;
    let http = reqwest::Client::new();
    let v1 = format!("{url}/api/gce-backend/v1");
    let cases = [
        (http.get(format!("{v1}/nothing-here")), 404, "ResourceNotFound"),
        (http.patch(format!("{v1}/configs")).bearer_auth(ADMIN), 405, "MethodNotAllowed"),
        (
            http.put(format!("{v1}/configs/x/amount")).bearer_auth(ADMIN).body("{not json"),
            400,
            "InvalidInput",
        ),
        (http.get(format!("{v1}/configs?limit=0")).bearer_auth(ADMIN), 400, "InvalidInput"),
        (http.get(format!("{v1}/configs?bogus=1")).bearer_auth(ADMIN), 400, "InvalidInput"),
        (
            http.get(format!("{v1}/configs")).header("authorization", "Basic eDp5"),
            401,
            "AuthenticationFailed",
        ),
        (
            http.get(format!("{v1}/queues/create_vm/dead?continuationToken=18446744073709551615"))
                .bearer_auth(ADMIN),
            400,
            "InvalidInput",
        ),
        (
            http.get(format!("{v1}/queues/create_vm/pending?continuationToken=9223372036854775807"))
                .bearer_auth(ADMIN),
            400,
            "InvalidInput",
        ),
    ];
    for (req, status, code) in cases {
        let req = req.build().unwrap();
        let (verb, path) = (req.method().to_string(), req.url().path().to_owned());
        let (got, v, id) = answer(http.execute(req).await.unwrap()).await;
        // Where the route is an operation, the document declares this answer.
        assert_eq!(super::check(&verb, &path, got, &v), !path.ends_with("nothing-here") && verb != "PATCH");
        assert_eq!((got, v["code"].as_str()), (status, Some(code)), "{v}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
        assert_eq!(v["requestId"].as_str(), id.as_deref(), "{v}");
    }
    // A body over 1 MiB is refused from its Content-Length, before it is read (sent by hand: a
    // client still writing it would see the connection close under it).
    let (status, v) = announce_too_much(&url, "/api/gce-backend/v1/configs/x/amount").await;
    assert_eq!((status, v["code"].as_str()), (413, Some("PayloadTooLarge")), "{v}");
    assert!(super::check("put", "/api/gce-backend/v1/configs/x/amount", status, &v));
    // The scheme is case-insensitive (RFC 7235).
    let (status, _, _) =
        raw(http.get(format!("{v1}/queues")).header("authorization", format!("bearer {ADMIN}"))).await;
    assert_eq!(status, 200);
    // A Config with many broken rules lists them all.
    let mut bad = super::config("good", &[], 0, 1);
    bad["attributes"]["zone"] = json!("Not A Zone");
    bad["swarming"] = json!("ftp://x");
    let (status, v) = api.call(Some(ADMIN), "createConfig", &[("prefix", "good")], Some(bad)).await;
    assert_eq!(status, 400);
    let fields: Vec<&str> =
        v["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["good.attributes.zone", "good.swarming"], "{v}");
    // What a person sends is read strictly, at every level: an unknown field (a typo) is named
    // with the path of the object that holds it; nothing is stored.
    let mut typo = super::config("typo", &[], 0, 1);
    typo["attributes"]["disk"][0]["sise"] = json!(3);
    let (status, v) = api.call(Some(ADMIN), "createConfig", &[("prefix", "typo")], Some(typo)).await;
    assert_eq!((status, v["code"].as_str()), (400, Some("InvalidInput")), "{v}");
    assert!(v["message"].as_str().unwrap().contains("body: attributes.disk[0]: unknown field `sise`"), "{v}");
    assert!(env.ctx.ports.store.config("typo").await.unwrap().is_none(), "nothing stored");

    assert_eq!(raw(http.get(format!("{url}/readyz"))).await.0, 200);
    env._redis.as_mut().unwrap().kill();
    let (status, v, _) = raw(http.get(format!("{url}/readyz"))).await;
    assert_eq!((status, v["code"].as_str()), (503, Some("Unavailable")), "{v}");
    assert_eq!(raw(http.get(format!("{url}/healthz"))).await.0, 200);
    let (status, v) = api.call(Some(ADMIN), "listConfigs", &[], None).await;
    assert_eq!((status, v["code"].as_str()), (503, Some("Unavailable")), "{v}");
    env._redis.as_mut().unwrap().restart();
    gce_backend_queues::testing::eventually("ready again", std::time::Duration::from_secs(30), || async {
        (raw(http.get(format!("{url}/readyz"))).await.0 == 200).then_some(())
    })
    .await;
}
