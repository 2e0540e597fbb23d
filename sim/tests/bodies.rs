//! Request bodies checked against Compute's published schema over HTTP: a misspelled field,
//! at the top or deep in an insert, a bulkInsert (zonal and regional) or a template, is a 400
//! with Google's message and body, and nothing is made; a full body is taken; the official
//! client, which passes unknown fields through, reports the 400 as Compute's; and the schema is
//! the official Python client's too.

use google_cloud_compute_v1::model;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{SimHandle, quick, start};
use crate::suspend::python;

const INSERT: &str = "/compute/v1/projects/proj/zones/us-central1-b/instances";
const ZONAL: &str = "/compute/v1/projects/proj/zones/us-central1-b/instances/bulkInsert";
const REGIONAL: &str = "/compute/v1/projects/proj/regions/us-central1/instances/bulkInsert";
const TEMPLATES: &str = "/compute/v1/projects/proj/global/instanceTemplates";

/// Google's message for `name`, unknown at `path`.
fn unknown(name: &str, path: &str) -> String {
    format!("Invalid JSON payload received. Unknown name \"{name}\" at '{path}': Cannot find field.")
}

/// An instance as the service makes one (every part it may set), without its name.
fn properties() -> Value {
    json!({
        "machineType": "e2-standard-2",
        "disks": [
            {"autoDelete": true, "boot": true, "interface": "NVME",
             "initializeParams": {"diskSizeGb": "20", "sourceImage": "projects/debian-cloud/global/images/debian-12",
                                  "diskType": "pd-balanced", "provisionedIops": "3000", "provisionedThroughput": "140"}},
            {"autoDelete": true, "boot": false, "type": "SCRATCH", "initializeParams": {"diskType": "local-ssd"}}
        ],
        "metadata": {"items": [{"key": "startup-script", "value": "echo hi"}]},
        "networkInterfaces": [{"network": "global/networks/default", "stackType": "IPV4_ONLY",
                               "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}]}],
        "labels": {"gce-backend": "sim", "gce-backend-config": "linux"},
        "serviceAccounts": [{"email": "bots@proj.iam.gserviceaccount.com",
                             "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
        "tags": {"items": ["swarming"]},
        "minCpuPlatform": "Intel Cascade Lake",
        "scheduling": {"provisioningModel": "SPOT", "automaticRestart": false, "onHostMaintenance": "TERMINATE",
                       "instanceTerminationAction": "DELETE",
                       "nodeAffinities": [{"key": "pool", "operator": "IN", "values": ["ci"]}]},
        "shieldedInstanceConfig": {"enableIntegrityMonitoring": true, "enableSecureBoot": true, "enableVtpm": true},
        "confidentialInstanceConfig": {"enableConfidentialCompute": true},
    })
}

/// [`properties`] as an insert body: named `name`, machine and disk types as zonal paths.
fn instance(name: &str) -> Value {
    let mut v = properties();
    v["name"] = json!(name);
    v["machineType"] = json!("zones/us-central1-b/machineTypes/e2-standard-2");
    v["disks"][0]["initializeParams"]["diskType"] = json!("zones/us-central1-b/diskTypes/pd-balanced");
    v["disks"][1]["initializeParams"]["diskType"] = json!("zones/us-central1-b/diskTypes/local-ssd");
    v
}

/// Posts `body` to `path`: it must be refused 400 with Google's body naming exactly `messages`.
async fn refused(s: &SimHandle, path: &str, body: Value, messages: &[String]) {
    let (code, v) = s.send(Method::POST, path, Some(body)).await;
    assert_eq!(code, 400, "{v}");
    let message = messages.join("\n");
    let e = &v["error"];
    assert_eq!(e["code"], 400, "{v}");
    assert_eq!(e["message"], message.as_str());
    assert_eq!(e["status"], "INVALID_ARGUMENT");
    assert_eq!(e["errors"], json!([{"message": message, "domain": "global", "reason": "invalid"}]));
    assert_eq!(e["details"][0]["@type"], "type.googleapis.com/google.rpc.BadRequest");
    let described: Vec<&str> = e["details"][0]["fieldViolations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["description"].as_str().unwrap())
        .collect();
    assert_eq!(described, messages);
}

async fn instances(s: &SimHandle) -> usize {
    s.admin_get("/sim/state").await["instances"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn a_misspelled_field_anywhere_in_an_insert_is_refused_and_nothing_is_made() {
    let s = start(quick()).await;
    let mut body = instance("vm-1");
    let accounts = body.as_object_mut().unwrap().remove("serviceAccounts").unwrap();
    body["serviceAcounts"] = accounts;
    refused(&s, INSERT, body, &[unknown("serviceAcounts", "resource")]).await;

    let mut body = instance("vm-1");
    body["shieldedInstanceConfig"]["enableSecureBot"] = json!(true);
    body["networkInterfaces"][0]["accessConfigs"][0]["natIp"] = json!("203.0.113.7");
    let at = "resource.network_interfaces[0].access_configs[0]";
    refused(
        &s,
        INSERT,
        body,
        &[unknown("natIp", at), unknown("enableSecureBot", "resource.shielded_instance_config")],
    )
    .await;
    assert_eq!(instances(&s).await, 0);
    assert_eq!(s.calls("compute.instances.insert", 400).await, 2);

    let (code, op) = s.send(Method::POST, INSERT, Some(instance("vm-1"))).await;
    assert_eq!(code, 200, "{op}");
    assert_eq!(instances(&s).await, 1);
}

#[tokio::test]
async fn bulk_inserts_and_templates_are_checked_all_the_way_down() {
    let s = start(quick()).await;
    let mut props = properties();
    props["shieldedInstanceConfig"] = json!({"enableSecureBot": true});
    let body = json!({"count": "2", "namePattern": "ci-##", "instanceProperties": props});
    let at = "resource.instance_properties.shielded_instance_config";
    refused(&s, ZONAL, body.clone(), &[unknown("enableSecureBot", at)]).await;
    let mut regional = body;
    regional["locationPolicy"] = json!({"targetShape": "BALANCED", "zone": ["zones/us-central1-b"]});
    let messages = [unknown("enableSecureBot", at), unknown("zone", "resource.location_policy")];
    refused(&s, REGIONAL, regional, &messages).await;

    let mut props = properties();
    props["name"] = json!("vm");
    refused(
        &s,
        TEMPLATES,
        json!({"name": "t-1", "properties": props}),
        &[unknown("name", "resource.properties")],
    )
    .await;
    assert_eq!(instances(&s).await, 0);
    let (_, list) = s.send(Method::GET, TEMPLATES, None).await;
    assert!(list.get("items").is_none(), "{list}");

    let (code, op) =
        s.send(Method::POST, TEMPLATES, Some(json!({"name": "t-1", "properties": properties()}))).await;
    assert_eq!(code, 200, "{op}");
    let bulk = json!({"count": "2", "minCount": "1", "perInstanceProperties": {"ci-a": {}, "ci-b": {}},
                      "sourceInstanceTemplate": "global/instanceTemplates/t-1",
                      "instanceProperties": {"labels": {"gce-backend-batch": "1"}}});
    let (code, op) = s.send(Method::POST, ZONAL, Some(bulk)).await;
    assert_eq!(code, 200, "{op}");
    let full = json!({"count": 1, "namePattern": "r-#", "instanceProperties": properties(),
                      "locationPolicy": {"targetShape": "ANY", "zones": [{"zone": "zones/us-central1-c"}]}});
    let (code, op) = s.send(Method::POST, REGIONAL, Some(full)).await;
    assert_eq!(code, 200, "{op}");
}

#[tokio::test]
async fn the_official_client_sends_unknown_fields_through_and_reports_compute_s_400() {
    let s = start(quick()).await;
    let mut body = instance("vm-1");
    body["scheduling"]["provisioningModle"] = json!("SPOT");
    // The client's types keep a field they do not know and send it back out as it came.
    let typed: model::Instance = serde_json::from_value(body).unwrap();
    let err = s
        .instances()
        .await
        .insert()
        .set_project("proj")
        .set_zone("us-central1-b")
        .set_body(typed)
        .send()
        .await
        .expect_err("refused");
    assert_eq!(err.http_status_code(), Some(400), "{err:?}");
    let status = err.status().expect("Google's error body");
    assert_eq!(status.code, google_cloud_gax::error::rpc::Code::InvalidArgument);
    assert_eq!(status.message, unknown("provisioningModle", "resource.scheduling"));
}

/// The schema, generated from the official Rust client's model, is also the official Python
/// client's: the same fields in every message, and the proto names the paths use.
#[test]
fn the_schema_agrees_with_the_official_python_client() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/src/schema/generate.py");
    let out = std::process::Command::new(python()).arg(script).arg("--python").output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
}
