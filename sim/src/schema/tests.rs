//! The schema's check: misspelled fields refused at Google's paths, full bodies taken, and the
//! committed schema still the official client's.

use serde_json::{Value, json};

use super::*;

/// An `instances.insert` body using every part of an instance the service sets.
fn full_instance() -> Value {
    json!({
        "name": "vm-1",
        "machineType": "zones/us-central1-b/machineTypes/e2-standard-2",
        "disks": [
            {"autoDelete": true, "boot": true, "interface": "NVME",
             "initializeParams": {"diskSizeGb": "100", "sourceImage": "projects/debian-cloud/global/images/debian-12",
                                  "diskType": "zones/us-central1-b/diskTypes/pd-balanced",
                                  "provisionedIops": "3000", "provisionedThroughput": "140"}},
            {"autoDelete": true, "boot": false, "type": "SCRATCH",
             "initializeParams": {"diskType": "zones/us-central1-b/diskTypes/local-ssd"}}
        ],
        "metadata": {"items": [{"key": "swarming-server", "value": "https://chromium-swarm.appspot.com"}]},
        "networkInterfaces": [{"network": "global/networks/default", "subnetwork": "regions/us-central1/subnetworks/s",
                               "stackType": "IPV4_ONLY",
                               "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}]}],
        "labels": {"gce-backend": "prod", "gce-backend-config": "linux"},
        "serviceAccounts": [{"email": "bot@p.iam.gserviceaccount.com", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
        "tags": {"items": ["swarming"]},
        "minCpuPlatform": "Intel Cascade Lake",
        "scheduling": {"provisioningModel": "SPOT", "automaticRestart": false, "onHostMaintenance": "TERMINATE",
                       "instanceTerminationAction": "DELETE", "preemptible": false,
                       "nodeAffinities": [{"key": "k", "operator": "IN", "values": ["v"]}]},
        "shieldedInstanceConfig": {"enableIntegrityMonitoring": true, "enableSecureBoot": true, "enableVtpm": true},
        "confidentialInstanceConfig": {"enableConfidentialCompute": true},
    })
}

/// The messages of `body` refused, one per field.
fn refused(body: Body, v: &Value) -> Vec<String> {
    check(body, v).expect_err("refused").unknown.iter().map(Unknown::message).collect()
}

#[test]
fn every_body_s_message_is_in_the_schema_with_the_fields_compute_publishes() {
    for body in [Body::Instance, Body::BulkInsert, Body::InstanceTemplate] {
        assert!(fields(body.message()).is_some(), "{body:?}");
    }
    let instance = fields("Instance").unwrap();
    for f in
        ["serviceAccounts", "shieldedInstanceConfig", "scheduling", "networkInterfaces", "disks", "labels"]
    {
        assert!(instance.contains(&f), "Instance has {f}: {instance:?}");
    }
    assert_eq!(
        fields("ShieldedInstanceConfig").unwrap(),
        ["enableIntegrityMonitoring", "enableSecureBoot", "enableVtpm"]
    );
    assert_eq!(fields("ServiceAccount").unwrap(), ["email", "scopes"]);
    // InstanceProperties has no name: a template's or a bulk's properties cannot carry one.
    assert!(!fields("InstanceProperties").unwrap().contains(&"name"));
}

#[test]
fn a_full_body_of_each_kind_is_taken() {
    let full = full_instance();
    assert_eq!(check(Body::Instance, &full), Ok(()));
    let mut properties = full.clone();
    properties.as_object_mut().unwrap().remove("name");
    properties["machineType"] = json!("e2-standard-2");
    let template = json!({"name": "t-1", "description": "d", "properties": properties});
    assert_eq!(check(Body::InstanceTemplate, &template), Ok(()));
    let bulk = json!({
        "count": "2", "minCount": "1", "namePattern": "ci-####",
        "perInstanceProperties": {"ci-a": {}, "ci-b": {"hostname": "ci-b.example.com"}},
        "sourceInstanceTemplate": "global/instanceTemplates/t-1", "instanceProperties": properties,
        "locationPolicy": {"targetShape": "BALANCED", "zones": [{"zone": "zones/us-central1-a"}],
                           "locations": {"zones/us-central1-b": {"preference": "ALLOW", "constraints": {"maxCount": 3}}}},
        "instanceFlexibilityPolicy": {"instanceSelections": {"first": {"machineTypes": ["n2-standard-2"], "rank": 0,
                                                                       "disks": [{"boot": true}]}}},
    });
    assert_eq!(check(Body::BulkInsert, &bulk), Ok(()));
}

#[test]
fn a_misspelled_field_is_refused_at_google_s_path() {
    let mut v = full_instance();
    let accounts = v.as_object_mut().unwrap().remove("serviceAccounts").unwrap();
    v["serviceAcounts"] = accounts;
    assert_eq!(
        refused(Body::Instance, &v),
        ["Invalid JSON payload received. Unknown name \"serviceAcounts\" at 'resource': Cannot find field."]
    );
    let mut v = full_instance();
    v["shieldedInstanceConfig"] = json!({"enableSecureBot": true});
    assert_eq!(
        refused(Body::Instance, &v),
        [
            "Invalid JSON payload received. Unknown name \"enableSecureBot\" at 'resource.shielded_instance_config': Cannot find field."
        ]
    );
    v["disks"][1]["initializeParams"]["sourceImg"] = json!("x");
    v["networkInterfaces"][0]["accessConfigs"][0]["natIp"] = json!("1.2.3.4");
    assert_eq!(
        refused(Body::Instance, &v),
        [
            "Invalid JSON payload received. Unknown name \"sourceImg\" at 'resource.disks[1].initialize_params': Cannot find field.",
            "Invalid JSON payload received. Unknown name \"natIp\" at 'resource.network_interfaces[0].access_configs[0]': Cannot find field.",
            "Invalid JSON payload received. Unknown name \"enableSecureBot\" at 'resource.shielded_instance_config': Cannot find field.",
        ]
    );
}

#[test]
fn templates_and_bulks_are_checked_all_the_way_down() {
    let t = json!({"name": "t", "properties": {"name": "vm", "scheduling": {"provisioning_model": "SPOT"}}});
    assert_eq!(
        refused(Body::InstanceTemplate, &t),
        [
            "Invalid JSON payload received. Unknown name \"name\" at 'resource.properties': Cannot find field.",
            "Invalid JSON payload received. Unknown name \"provisioning_model\" at 'resource.properties.scheduling': Cannot find field.",
        ]
    );
    let b = json!({"count": 1, "perInstanceProperties": {"a": {}, "b": {"hostName": "h"}},
                   "instanceProperties": {"labels": {"any-key": "is fine"}},
                   "locationPolicy": {"locations": {"zones/z": {"constraints": {"max": 1}}}}});
    assert_eq!(
        refused(Body::BulkInsert, &b),
        [
            "Invalid JSON payload received. Unknown name \"max\" at 'resource.location_policy.locations[0].value.constraints': Cannot find field.",
            "Invalid JSON payload received. Unknown name \"hostName\" at 'resource.per_instance_properties[1].value': Cannot find field.",
        ]
    );
}

#[test]
fn a_list_where_one_value_goes_is_refused() {
    let v =
        json!({"name": "vm", "tags": ["swarming"], "metadata": {"items": [{"key": "k", "value": ["v"]}]}});
    assert_eq!(
        refused(Body::Instance, &v),
        [
            "Invalid JSON payload received. Unknown name \"value\" at 'resource.metadata.items[0]': Proto field is not repeating, cannot start list.",
            "Invalid JSON payload received. Unknown name \"tags\" at 'resource': Proto field is not repeating, cannot start list.",
        ]
    );
}

#[test]
fn proto_names_are_the_json_names_in_snake_case() {
    for (json, proto) in [
        ("shieldedInstanceConfig", "shielded_instance_config"),
        ("natIP", "nat_ip"),
        ("ipv6AccessConfigs", "ipv6_access_configs"),
        ("disks", "disks"),
    ] {
        assert_eq!(snake(json), proto);
    }
}

/// The committed schema is what `generate.py` makes of the client Cargo.lock pins (Python 3 and
/// the crate's sources in Cargo's registry, which building these tests fetched).
#[test]
fn the_schema_is_the_official_client_s() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/src/schema/generate.py");
    let out =
        std::process::Command::new("python3").arg(script).arg("--check").output().expect("python3 runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
