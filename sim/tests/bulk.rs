//! bulkInsert over HTTP: zonal and regional, names from a pattern (after the largest in use) or
//! listed, each instance booted as an insert with its own operation in the bulk's group, the
//! outcome per zone, ranked machine types past a stockout, minCount rollback, requestId replay,
//! names in use skipped, bad bodies refused, templates; and the official Rust client making a
//! zonal and a regional one, and the official Python client too (`bulk_insert.py`).

use std::time::Duration;

use gce_backend_sim::SimConfig;
use google_cloud_lro::Poller;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{SimHandle, eventually, quick, rid, start};

const P: &str = "proj";
const Z: &str = "us-central1-b";
const R: &str = "us-central1";
const SERVER: &str = "swarm.example.com";
const WAIT: Duration = Duration::from_secs(10);

fn zonal(zone: &str) -> String {
    format!("/compute/v1/projects/{P}/zones/{zone}/instances/bulkInsert")
}

fn regional(region: &str) -> String {
    format!("/compute/v1/projects/{P}/regions/{region}/instances/bulkInsert")
}

/// Properties every test's instances share: a small machine whose bot connects to [`SERVER`].
fn props() -> Value {
    json!({"machineType": "e2-small", "labels": {"pool": "ci"},
           "metadata": {"items": [{"key": "swarming-server", "value": format!("https://{SERVER}")}]},
           "networkInterfaces": [{"network": "global/networks/default"}]})
}

/// The operation `op` polled (at its selfLink) until DONE.
pub(crate) async fn done(s: &SimHandle, op: &Value) -> Value {
    let link = op["selfLink"].as_str().expect("an operation has a selfLink");
    let path = link.trim_start_matches("https://www.googleapis.com").to_owned();
    eventually("the operation is DONE", WAIT, || async {
        let (code, v) = s.send(Method::GET, &path, None).await;
        (code == 200 && v["status"] == "DONE").then_some(v)
    })
    .await
}

/// Sends a bulkInsert to `path`: its operation, which must be accepted.
async fn bulk(s: &SimHandle, path: &str, body: Value) -> Value {
    let (code, op) = s.send(Method::POST, path, Some(body)).await;
    assert_eq!(code, 200, "{op}");
    op
}

/// `perLocationStatus` of a bulk operation.
fn per_zone(op: &Value) -> &Value {
    &op["instancesBulkInsertOperationMetadata"]["perLocationStatus"]
}

fn zone_status(status: &str, target: u32, created: u32, failed: u32, deleted: u32) -> Value {
    json!({"status": status, "targetVmCount": target, "createdVmCount": created,
           "failedToCreateVmCount": failed, "deletedVmCount": deleted})
}

/// The instance `name` in `zone`, once its status is `want`.
async fn instance_becomes(s: &SimHandle, zone: &str, name: &str, want: &str) -> Value {
    let path = format!("/compute/v1/projects/{P}/zones/{zone}/instances/{name}");
    eventually(&format!("{zone}/{name} is {want}"), WAIT, || async {
        let (code, v) = s.send(Method::GET, &path, None).await;
        (code == 200 && v["status"] == want).then_some(v)
    })
    .await
}

/// (zone, name) of every instance the simulator holds.
async fn instances(s: &SimHandle) -> Vec<(String, String)> {
    let state = s.admin_get("/sim/state").await;
    let rows = state["instances"].as_array().unwrap();
    rows.iter()
        .map(|i| (i["zone"].as_str().unwrap().to_owned(), i["name"].as_str().unwrap().to_owned()))
        .collect()
}

/// The operations in group `group`, as `/sim/state` shows them.
async fn group_ops(s: &SimHandle, group: &Value) -> Vec<Value> {
    let state = s.admin_get("/sim/state").await;
    state["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["operationGroupId"] == *group)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zonal_bulk_numbers_after_the_largest_name_and_boots_each_instance_as_an_insert() {
    let s = start(quick()).await;
    s.create("ci-0007", None, &[], None).await;
    let id = rid("bulk-zonal");
    let body = json!({"count": "3", "namePattern": "ci-####", "instanceProperties": props()});
    let op = bulk(&s, &format!("{}?requestId={id}", zonal(Z)), body).await;
    assert_eq!((op["status"].clone(), op["operationType"].clone()), (json!("RUNNING"), json!("bulkInsert")));
    assert_eq!(op["clientOperationId"], id.as_str());
    assert!(op["zone"].as_str().unwrap().ends_with(&format!("/zones/{Z}")), "{op}");
    assert!(op.get("targetLink").is_none(), "a bulk has no single target: {op}");
    let group = op["operationGroupId"].clone();
    assert!(group.as_str().is_some_and(|g| !g.is_empty()), "{op}");

    let op = done(&s, &op).await;
    assert!(op.get("error").is_none(), "{op}");
    assert_eq!(per_zone(&op), &json!({format!("zones/{Z}"): zone_status("DONE", 3, 3, 0, 0)}));
    for name in ["ci-0008", "ci-0009", "ci-0010"] {
        let i = instance_becomes(&s, Z, name, "RUNNING").await;
        assert_eq!(i["labels"], json!({"pool": "ci"}), "the properties' labels");
        assert!(i["machineType"].as_str().unwrap().ends_with(&format!("zones/{Z}/machineTypes/e2-small")));
    }
    eventually("the bot of a bulk's instance connects", WAIT, || async {
        s.prpc(SERVER, "GetBot", json!({"botId": "ci-0010"})).await.ok()
    })
    .await;
    let ops = group_ops(&s, &group).await;
    let mut inserts: Vec<&str> =
        ops.iter().filter(|o| o["type"] == "insert").map(|o| o["target"].as_str().unwrap()).collect();
    inserts.sort();
    assert_eq!(inserts, ["ci-0008", "ci-0009", "ci-0010"], "each instance has its insert in the group");
    assert_eq!(ops.iter().filter(|o| o["type"] == "bulkInsert").count(), 1);
    let summary = s.admin_get("/sim/summary").await;
    assert_eq!(
        (summary["actions"]["bulkInsert"].clone(), summary["actions"]["insert"].clone()),
        (json!(1), json!(4))
    );
    assert_eq!(summary["instances"]["RUNNING"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regional_bulk_with_listed_names_spreads_balanced_over_the_allowed_zones() {
    let s = start(quick()).await;
    let body = json!({
        "count": 4, "instanceProperties": props(),
        "perInstanceProperties": {"web-a": {"hostname": "web-a.example.com"}, "web-b": {}, "web-c": {}, "web-d": {}},
        "locationPolicy": {"targetShape": "BALANCED", "locations": {"zones/us-central1-c": {"preference": "DENY"}}},
    });
    let op = bulk(&s, &regional(R), body).await;
    assert!(op["region"].as_str().unwrap().ends_with(&format!("/regions/{R}")), "{op}");
    assert!(op["selfLink"].as_str().unwrap().contains(&format!("/regions/{R}/operations/")));
    let zonal_path =
        format!("/compute/v1/projects/{P}/zones/{Z}/operations/{}", op["name"].as_str().unwrap());
    assert_eq!(
        s.send(Method::GET, &zonal_path, None).await.0,
        404,
        "a regional operation is not a zonal one"
    );

    let op = done(&s, &op).await;
    assert_eq!(
        per_zone(&op),
        &json!({"zones/us-central1-a": zone_status("DONE", 2, 2, 0, 0),
                "zones/us-central1-b": zone_status("DONE", 2, 2, 0, 0)}),
        "two in each allowed zone, none in the denied one"
    );
    let mut placed = instances(&s).await;
    placed.sort();
    let want: Vec<(String, String)> =
        [("us-central1-a", "web-a"), ("us-central1-a", "web-c"), (Z, "web-b"), (Z, "web-d")]
            .iter()
            .map(|(z, n)| (z.to_string(), n.to_string()))
            .collect();
    assert_eq!(placed, want);
    let a = instance_becomes(&s, "us-central1-a", "web-a", "RUNNING").await;
    assert_eq!(a["hostname"], "web-a.example.com", "the hostname given for it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranked_machine_types_fall_to_the_next_rank_past_a_stockout() {
    let faults = r#"{"stockouts": ["us-central1-b/n2-standard-8", "us-central1-c"]}"#;
    let s = start(quick()).await;
    let (code, _) = s.admin_post("/sim/faults", serde_json::from_str(faults).unwrap()).await;
    assert_eq!(code, 200);
    let ranked = json!({"instanceSelections": {
        "second": {"machineTypes": ["n2d-standard-8"], "rank": "2"},
        "first": {"machineTypes": ["n2-standard-8"], "rank": "1"}}});
    let body = json!({"count": 2, "namePattern": "flex-##", "instanceProperties": props(),
                      "instanceFlexibilityPolicy": ranked});
    let op = done(&s, &bulk(&s, &zonal(Z), body.clone()).await).await;
    assert_eq!(per_zone(&op)[format!("zones/{Z}")], zone_status("DONE", 2, 2, 0, 0));
    for name in ["flex-01", "flex-02"] {
        let i = instance_becomes(&s, Z, name, "RUNNING").await;
        assert!(
            i["machineType"].as_str().unwrap().ends_with("/n2d-standard-8"),
            "rank 2: {}",
            i["machineType"]
        );
    }

    // A single insert of the stocked-out machine type fails as Compute's does, asynchronously.
    let insert = json!({"name": "single", "machineType": format!("zones/{Z}/machineTypes/n2-standard-8")});
    let (code, op) =
        s.send(Method::POST, &format!("/compute/v1/projects/{P}/zones/{Z}/instances"), Some(insert)).await;
    assert_eq!(code, 200);
    let op = done(&s, &op).await;
    assert_eq!(op["error"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED");

    // Regional, one zone (the default shape): the zone where the best rank that fits is.
    let regional_body = json!({"count": 1, "namePattern": "reg-#", "instanceProperties": props(),
        "instanceFlexibilityPolicy": ranked,
        "locationPolicy": {"zones": [{"zone": "zones/us-central1-c"}, {"zone": format!("zones/{Z}")}]}});
    let op = done(&s, &bulk(&s, &regional(R), regional_body).await).await;
    assert_eq!(per_zone(&op), &json!({format!("zones/{Z}"): zone_status("DONE", 1, 1, 0, 0)}));

    // Every rank stocked out: refused at once, nothing made.
    let before = s.admin_get("/sim/summary").await;
    let (code, err) = s.send(Method::POST, &zonal("us-central1-c"), Some(body)).await;
    assert_eq!(code, 503, "{err}");
    assert_eq!(err["error"]["errors"][0]["reason"], "insufficientCapacity");
    let after = s.admin_get("/sim/summary").await;
    assert_eq!(after["operations"]["total"], before["operations"]["total"], "no operation made");
    assert_eq!(after["instances"]["total"], before["instances"]["total"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmet_min_count_rolls_back_and_a_met_one_keeps_what_was_made() {
    let cfg = SimConfig { instance_quota: 3, ..quick() };
    let s = start(cfg).await;
    let body = json!({"count": 5, "minCount": "5", "namePattern": "rb-#", "instanceProperties": props()});
    let op = bulk(&s, &zonal(Z), body).await;
    assert_eq!(per_zone(&op)[format!("zones/{Z}")]["status"], "ROLLING_BACK", "{op}");
    let group = op["operationGroupId"].clone();
    let op = done(&s, &op).await;
    assert_eq!(per_zone(&op)[format!("zones/{Z}")], zone_status("DONE", 5, 3, 2, 3));
    assert_eq!(op["error"]["errors"][0]["code"], "QUOTA_EXCEEDED", "{op}");
    assert_eq!(op["httpErrorStatusCode"], 403);
    let failed: Vec<Value> = group_ops(&s, &group)
        .await
        .into_iter()
        .filter(|o| o["type"] == "insert" && !o["error"].is_null())
        .collect();
    assert_eq!(failed.len(), 2, "the two over quota: failed inserts in the group");
    assert!(failed.iter().all(|o| o["error"]["code"] == "QUOTA_EXCEEDED"));
    eventually("the rolled-back instances are gone", WAIT, || async {
        instances(&s).await.is_empty().then_some(())
    })
    .await;

    let body = json!({"count": 5, "minCount": 2, "namePattern": "ok-#", "instanceProperties": props()});
    let op = done(&s, &bulk(&s, &zonal(Z), body).await).await;
    assert!(op.get("error").is_none(), "{op}");
    assert_eq!(per_zone(&op)[format!("zones/{Z}")], zone_status("DONE", 5, 3, 2, 0));
    for name in ["ok-1", "ok-2", "ok-3"] {
        instance_becomes(&s, Z, name, "RUNNING").await;
    }

    // The region's instances quota is used up: refused at once.
    let body = json!({"count": 1, "namePattern": "more-#", "instanceProperties": props()});
    let (code, err) = s.send(Method::POST, &zonal(Z), Some(body)).await;
    assert_eq!(code, 403, "{err}");
    assert_eq!(err["error"]["errors"][0]["reason"], "quotaExceeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_request_id_returns_the_same_operation_and_makes_nothing_new() {
    let s = start(quick()).await;
    let path = format!("{}?requestId={}", regional(R), rid("bulk-replay"));
    let body = json!({"count": 2, "namePattern": "rep-#", "instanceProperties": props()});
    let first = bulk(&s, &path, body.clone()).await;
    let again = bulk(&s, &path, body).await;
    assert_eq!(first["name"], again["name"]);
    done(&s, &first).await;
    let other = json!({"count": 3, "namePattern": "other-#", "instanceProperties": props()});
    let late = bulk(&s, &path, other).await;
    assert_eq!(late["name"], first["name"], "the same requestId, even with another body, even once DONE");
    assert_eq!(late["status"], "DONE");
    assert_eq!(instances(&s).await.len(), 2);
    assert_eq!(s.admin_get("/sim/summary").await["actions"]["bulkInsert"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_in_use_are_not_made_again() {
    let s = start(quick()).await;
    s.create("keep-a", None, &[], None).await;
    let id_before = instance_becomes(&s, Z, "keep-a", "RUNNING").await["id"].clone();
    let body = json!({"count": 2, "minCount": 1, "instanceProperties": props(),
                      "perInstanceProperties": {"keep-a": {}, "keep-b": {}}});
    let op = bulk(&s, &regional(R), body).await;
    let group = op["operationGroupId"].clone();
    let op = done(&s, &op).await;
    assert!(op.get("error").is_none(), "minCount 1 is met: {op}");
    let counts = per_zone(&op);
    assert_eq!(counts[format!("zones/{Z}")]["failedToCreateVmCount"], 1, "{counts}");
    let created: u64 =
        counts.as_object().unwrap().values().map(|c| c["createdVmCount"].as_u64().unwrap()).sum();
    assert_eq!(created, 1);
    let failed: Vec<Value> =
        group_ops(&s, &group).await.into_iter().filter(|o| !o["error"].is_null()).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (failed[0]["target"].clone(), failed[0]["error"]["code"].clone()),
        (json!("keep-a"), json!("RESOURCE_ALREADY_EXISTS"))
    );
    let after = instance_becomes(&s, Z, "keep-a", "RUNNING").await;
    assert_eq!(after["id"], id_before, "the instance in use is left alone");
    let names: Vec<String> = instances(&s).await.into_iter().map(|(_, n)| n).collect();
    assert_eq!(names.iter().filter(|n| *n == "keep-a").count(), 1, "not made again in another zone");
    assert!(names.contains(&"keep-b".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_refused_as_invalid_and_change_nothing() {
    let s = start(quick()).await;
    let p = props();
    let cases = [
        (zonal(Z), json!({"count": "0", "namePattern": "v-#", "instanceProperties": p})),
        (zonal(Z), json!({"count": 5001, "namePattern": "v-####", "instanceProperties": p})),
        (zonal(Z), json!({"count": 2, "minCount": 3, "namePattern": "v-#", "instanceProperties": p})),
        (zonal(Z), json!({"count": 1, "instanceProperties": p})),
        (
            zonal(Z),
            json!({"count": 1, "namePattern": "v-#", "perInstanceProperties": {"a": {}}, "instanceProperties": p}),
        ),
        (zonal(Z), json!({"count": 1, "namePattern": "v-#", "instanceProperties": {"labels": {}}})),
        (zonal("us-central1-z"), json!({"count": 1, "namePattern": "v-#", "instanceProperties": p})),
        (regional("mars-north1"), json!({"count": 1, "namePattern": "v-#", "instanceProperties": p})),
        (
            regional(R),
            json!({"count": 1, "namePattern": "v-#", "instanceProperties": p,
                             "locationPolicy": {"zones": [{"zone": "zones/us-east1-b"}]}}),
        ),
        (
            regional(R),
            json!({"count": 1, "namePattern": "v-#", "instanceProperties": p,
                             "locationPolicy": {"locations": {"zones/us-central1-a": {"preference": "DENY"},
                                                              "zones/us-central1-b": {"preference": "DENY"},
                                                              "zones/us-central1-c": {"preference": "DENY"}}}}),
        ),
    ];
    for (path, body) in cases {
        let (code, err) = s.send(Method::POST, &path, Some(body.clone())).await;
        assert_eq!(
            (code, err["error"]["errors"][0]["reason"].clone()),
            (400, json!("invalid")),
            "{path} {body}: {err}"
        );
        assert!(err["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let r = s.http.post(format!("{}{}", s.base, zonal(Z))).body("{not json").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let summary = s.admin_get("/sim/summary").await;
    assert_eq!(
        (summary["operations"]["total"].clone(), summary["instances"]["total"].clone()),
        (json!(0), json!(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_takes_a_templates_properties_under_its_own() {
    let s = start(quick()).await;
    let templates = format!("/compute/v1/projects/{P}/global/instanceTemplates");
    let mut properties = props();
    properties["labels"] = json!({"pool": "ci", "tier": "gold"});
    let (code, op) =
        s.send(Method::POST, &templates, Some(json!({"name": "tmpl-1", "properties": properties}))).await;
    assert_eq!(code, 200, "{op}");
    assert!(op["selfLink"].as_str().unwrap().contains("/global/operations/"), "{op}");
    assert!(op["targetLink"].as_str().unwrap().ends_with("/global/instanceTemplates/tmpl-1"));
    done(&s, &op).await;
    let (code, _) = s.send(Method::POST, &templates, Some(json!({"name": "tmpl-1", "properties": {}}))).await;
    assert_eq!(code, 409, "a template name is taken once");
    let (_, list) = s.send(Method::GET, &templates, None).await;
    assert_eq!(list["items"][0]["name"], "tmpl-1");
    let (code, t) = s.send(Method::GET, &format!("{templates}/tmpl-1"), None).await;
    assert_eq!((code, t["properties"]["labels"]["tier"].clone()), (200, json!("gold")));

    let body = json!({"count": 1, "namePattern": "t-#", "sourceInstanceTemplate": "global/instanceTemplates/tmpl-1",
                      "instanceProperties": {"labels": {"tier": "silver", "pool": null}}});
    let op = done(&s, &bulk(&s, &zonal(Z), body.clone()).await).await;
    assert!(op.get("error").is_none(), "{op}");
    let i = instance_becomes(&s, Z, "t-1", "RUNNING").await;
    assert_eq!(i["labels"], json!({"tier": "silver"}), "merged as a JSON Merge Patch");
    assert!(i["machineType"].as_str().unwrap().ends_with("/e2-small"), "the template's machine type");

    let (code, op) = s.send(Method::DELETE, &format!("{templates}/tmpl-1"), None).await;
    assert_eq!(code, 200);
    done(&s, &op).await;
    assert_eq!(s.send(Method::GET, &format!("{templates}/tmpl-1"), None).await.0, 404);
    let (code, err) = s.send(Method::POST, &zonal(Z), Some(body)).await;
    assert_eq!((code, err["error"]["errors"][0]["reason"].clone()), (404, json!("notFound")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_bulk_inserts_in_a_zone_and_a_region() {
    use google_cloud_compute_v1::model::BulkInsertInstanceResource;
    let s = start(quick()).await;
    let resource = |pattern: &str, shape: &str| -> BulkInsertInstanceResource {
        serde_json::from_value(json!({"count": "2", "minCount": "1", "namePattern": pattern,
            "instanceProperties": {"machineType": "e2-small"}, "locationPolicy": {"targetShape": shape}}))
        .expect("a bulk body")
    };
    let op = s
        .instances()
        .await
        .bulk_insert()
        .set_project(P)
        .set_zone(Z)
        .set_request_id(rid("rust-zonal"))
        .set_body(resource("rz-##", "ANY_SINGLE_ZONE"))
        .poller()
        .until_done()
        .await
        .unwrap()
        .to_result()
        .unwrap();
    assert_eq!(op.operation_type.as_deref(), Some("bulkInsert"));
    assert!(op.operation_group_id.is_some());
    let per = op.instances_bulk_insert_operation_metadata.unwrap().per_location_status;
    assert_eq!(per[&format!("zones/{Z}")].created_vm_count, Some(2));

    let op = s
        .region_instances()
        .await
        .bulk_insert()
        .set_project(P)
        .set_region(R)
        .set_request_id(rid("rust-regional"))
        .set_body(resource("rr-##", "ANY"))
        .poller()
        .until_done()
        .await
        .unwrap()
        .to_result()
        .unwrap();
    assert!(op.region.as_deref().is_some_and(|r| r.ends_with(&format!("/regions/{R}"))));
    let per = op.instances_bulk_insert_operation_metadata.unwrap().per_location_status;
    let created: i32 = per.values().filter_map(|s| s.created_vm_count).sum();
    assert_eq!(created, 2, "{per:?}");
    assert_eq!(instances(&s).await.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_bulk_inserts_in_a_zone_and_a_region() {
    let s = start(quick()).await;
    crate::suspend::python_says_ok("bulk_insert.py", &[&s.base, P, Z]).await;
    let summary = s.admin_get("/sim/summary").await;
    assert_eq!(summary["actions"]["bulkInsert"], 2);
    assert_eq!(summary["instances"]["total"], 4);
    let calls = s.admin_get("/sim/calls").await["calls"].clone();
    assert_eq!(calls["compute.instances.bulkInsert"]["200"], 1);
    assert_eq!(calls["compute.regionInstances.bulkInsert"]["200"], 1);
    assert!(calls["compute.regionOperations.get"]["200"].as_u64().is_some_and(|n| n >= 1), "{calls}");
}
