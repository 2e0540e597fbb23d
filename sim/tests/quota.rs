//! API rate quotas over HTTP (the default `gce-default`): the 1 501st mutation of a project in
//! one minute is refused with Compute's 403 `rateLimitExceeded` and does nothing, a bulkInsert
//! counts as one, other groups and projects are not held back, the next minute refills; bulk
//! inserts are held to 10 running. The clock is moved with `POST /sim/clock`, not waited for.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{SimHandle, quick, start};

const P: &str = "proj";
const Z: &str = "us-central1-b";

fn insert_path(project: &str) -> String {
    format!("/compute/v1/projects/{project}/zones/{Z}/instances")
}

fn body(name: &str) -> Value {
    json!({"name": name, "machineType": format!("zones/{Z}/machineTypes/e2-small")})
}

async fn next_minute(s: &SimHandle) {
    let (code, v) = s.admin_post("/sim/clock", json!({"next_minute": true})).await;
    assert_eq!(code, 200, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_1501st_mutation_in_a_minute_is_refused_until_the_next_minute() {
    let s = start(quick()).await;
    next_minute(&s).await;
    let missing = format!("{}/nope", insert_path(P));
    for _ in 0..1498 {
        assert_eq!(s.send(Method::DELETE, &missing, None).await.0, 404, "a mutation, answered");
    }
    let bulk = json!({"count": 3, "namePattern": "b-#", "instanceProperties": {"machineType": "e2-small"}});
    let path = format!("/compute/v1/projects/{P}/zones/{Z}/instances/bulkInsert");
    assert_eq!(s.send(Method::POST, &path, Some(bulk)).await.0, 200, "a bulk of 3 counts as one");
    assert_eq!(s.send(Method::POST, &insert_path(P), Some(body("vm-1500"))).await.0, 200);

    let (code, err) = s.send(Method::POST, &insert_path(P), Some(body("vm-1501"))).await;
    assert_eq!(code, 403, "{err}");
    assert_eq!(err["error"]["code"], 403);
    assert_eq!(err["error"]["errors"][0]["reason"], "rateLimitExceeded");
    assert_eq!(err["error"]["errors"][0]["domain"], "global");
    assert!(err["error"]["message"].as_str().unwrap().contains("Queries"), "{err}");
    let get = format!("{}/vm-1501", insert_path(P));
    assert_eq!(
        s.send(Method::GET, &get, None).await.0,
        404,
        "the refused insert made nothing (reads still go)"
    );
    assert_eq!(
        s.send(Method::POST, &insert_path("other"), Some(body("vm-x"))).await.0,
        200,
        "another project"
    );

    next_minute(&s).await;
    assert_eq!(s.send(Method::POST, &insert_path(P), Some(body("vm-1501"))).await.0, 200, "refilled");
    let summary = s.admin_get("/sim/summary").await;
    assert_eq!(summary["quota"], "gce-default");
    assert_eq!(summary["rateLimited"], json!({"total": 1, "byMethod": {"compute.instances.insert": 1}}));
    assert_eq!(
        summary["apiRequests"]["byProject"][P],
        json!({"mutations": 1502, "reads": 1, "lists": 0, "operations": 0})
    );
    assert_eq!(summary["apiRequests"]["total"], 1504);
    assert_eq!(s.calls("compute.instances.insert", 403).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eleventh_running_bulk_insert_is_refused() {
    let s = start(gce_backend_sim::SimConfig { op_ms: 60_000, ..quick() }).await;
    next_minute(&s).await;
    let path = format!("/compute/v1/projects/{P}/regions/us-central1/instances/bulkInsert");
    let bulk = |n: u32| json!({"count": 1, "namePattern": format!("b{n}-#"), "instanceProperties": {"machineType": "e2-small"}});
    for n in 0..10 {
        let (code, op) = s.send(Method::POST, &path, Some(bulk(n))).await;
        assert_eq!((code, op["status"].clone()), (200, json!("RUNNING")), "{op}");
    }
    let (code, err) = s.send(Method::POST, &path, Some(bulk(10))).await;
    assert_eq!(
        (code, err["error"]["errors"][0]["reason"].clone()),
        (403, json!("rateLimitExceeded")),
        "{err}"
    );
    assert!(err["error"]["message"].as_str().unwrap().contains("10 bulk insert operations running"), "{err}");
    let (code, _) = s.admin_post("/sim/clock", json!({"advance_ms": 61_000})).await;
    assert_eq!(code, 200);
    assert_eq!(s.send(Method::POST, &path, Some(bulk(11))).await.0, 200, "the first ten are DONE");
    let summary = s.admin_get("/sim/summary").await;
    assert_eq!(summary["rateLimited"]["byMethod"]["compute.regionInstances.bulkInsert"], 1);
    assert_eq!(summary["instances"]["total"], 11, "the refused bulk made nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clock_moves_ahead_only_when_asked_well() {
    let s = start(quick()).await;
    for bad in [
        json!({}),
        json!({"advance_ms": 1, "next_minute": true}),
        json!({"advance_ms": -1}),
        json!({"advance_ms": 86_400_001}),
        json!({"hours": 1}),
    ] {
        let (code, v) = s.admin_post("/sim/clock", bad.clone()).await;
        assert_eq!(code, 400, "{bad}: {v}");
    }
    let before = s.admin_get("/sim/tasks").await["nowMs"].as_u64().unwrap();
    let (code, v) = s.admin_post("/sim/clock", json!({"advance_ms": 3_600_000})).await;
    assert_eq!(code, 200);
    assert!(v["nowMs"].as_u64().unwrap() >= before + 3_600_000, "{v}");
    let (_, v) = s.admin_post("/sim/clock", json!({"next_minute": true})).await;
    let now = chrono::DateTime::parse_from_rfc3339(v["now"].as_str().unwrap()).unwrap();
    assert_eq!(now.timestamp_subsec_millis() as i64 + now.timestamp() % 60 * 1000, 0, "{v}");
}
