//! Unit tests of `adapters/gce_resource.rs`.

use super::*;

#[test]
fn the_resource_has_the_spec_s_name_labels_metadata_disks_and_nics() {
    let yaml = "prefix: linux\namount: {min: 1, max: 1}\nattributes:\n  project: p\n  zone: z\n  machine_type: zones/z/machineTypes/e2-small\n  disk: [{image: global/images/x, size: 10, type: zones/z/diskTypes/local-ssd}, {size: 20}]\n  network_interface: [{network: global/networks/default, access_config: [{type: ONE_TO_ONE_NAT}]}]\n  enable_secure_boot: true\nlifetime: 1d\nswarming: https://swarm.example.com\n";
    let c = gce_backend_jobs::config::Config::parse(yaml, "t").unwrap();
    let spec = InstanceSpec {
        name: "linux-0-abcd".into(),
        attributes: c.attributes,
        metadata: vec![("swarming-server".into(), "https://swarm.example.com".into())],
        labels: [("gce-backend".to_owned(), "prod".to_owned())].into(),
    };
    let r = resource(&spec);
    assert_eq!(r["name"], "linux-0-abcd");
    assert_eq!(r["labels"]["gce-backend"], "prod");
    assert_eq!(r["machineType"], "zones/z/machineTypes/e2-small");
    assert_eq!((r["disks"][0]["boot"].as_bool(), r["disks"][1]["boot"].as_bool()), (Some(true), Some(false)));
    assert_eq!(r["disks"][0]["type"], "SCRATCH");
    assert_eq!(r["disks"][1]["initializeParams"]["diskSizeGb"], "20");
    assert_eq!(r["metadata"]["items"][0]["key"], "swarming-server");
    assert_eq!(r["networkInterfaces"][0]["accessConfigs"][0]["type"], "ONE_TO_ONE_NAT");
    assert_eq!(r["shieldedInstanceConfig"]["enableSecureBoot"], true);
    let decoded: google_cloud_compute_v1::model::Instance = serde_json::from_value(r).unwrap();
    assert_eq!(decoded.name.as_deref(), Some("linux-0-abcd"), "the official client reads it");
}

#[test]
fn a_bulk_names_each_instance_and_gives_types_by_name() {
    let yaml = "prefix: linux\namount: {min: 1, max: 1}\nattributes:\n  project: p\n  zone: z\n  machine_type: zones/z/machineTypes/e2-small\n  disk: [{image: global/images/x, size: 10, type: zones/z/diskTypes/pd-ssd}]\n  network_interface: [{network: global/networks/default}]\nlifetime: 1d\nswarming: https://swarm.example.com\n";
    let c = gce_backend_jobs::config::Config::parse(yaml, "t").unwrap();
    let spec = InstanceSpec {
        name: String::new(),
        attributes: c.attributes,
        metadata: vec![],
        labels: [("gce-backend".to_owned(), "prod".to_owned())].into(),
    };
    let names = vec!["linux-0-abcd".to_owned(), "linux-1-efgh".to_owned()];
    let b = bulk(&BulkSpec { instance: spec, names, template: None });
    assert_eq!((b["count"].as_str(), b["minCount"].as_str()), (Some("2"), Some("1")));
    assert!(b["perInstanceProperties"]["linux-1-efgh"].is_object());
    let p = &b["instanceProperties"];
    assert_eq!(p["machineType"], "e2-small");
    assert_eq!(p["disks"][0]["initializeParams"]["diskType"], "pd-ssd");
    assert!(p.get("name").is_none());
    assert_eq!(p["labels"]["gce-backend"], "prod");
    let decoded: google_cloud_compute_v1::model::BulkInsertInstanceResource =
        serde_json::from_value(b).unwrap();
    assert_eq!(decoded.count, Some(2), "the official client reads it");
    assert_eq!(decoded.per_instance_properties.len(), 2);
}

/// A Config's instance, as a template holds it and as a bulk of it asks for it.
fn pool_spec() -> InstanceSpec {
    let yaml = "prefix: linux\namount: {min: 1, max: 1}\nattributes:\n  project: p\n  zone: z\n  machine_type: zones/z/machineTypes/e2-small\n  disk: [{image: global/images/x, size: 10, type: zones/z/diskTypes/pd-ssd}]\n  network_interface: [{network: global/networks/default}]\n  provisioning_model: SPOT\nlifetime: 1d\nswarming: https://swarm.example.com\n";
    let c = gce_backend_jobs::config::Config::parse(yaml, "t").unwrap();
    InstanceSpec {
        name: String::new(),
        attributes: c.attributes,
        metadata: vec![("swarming-server".into(), "https://swarm.example.com".into())],
        labels: [
            ("gce-backend".to_owned(), "prod".to_owned()),
            ("gce-backend-config".to_owned(), "linux".to_owned()),
        ]
        .into(),
    }
}

#[test]
fn a_template_holds_the_instance_properties_zone_free() {
    let t =
        TemplateSpec { name: "linux-0123abcd".into(), description: "linux".into(), instance: pool_spec() };
    let v = template(&t);
    assert_eq!(v["name"], "linux-0123abcd");
    let p = &v["properties"];
    assert_eq!(p["machineType"], "e2-small", "by name, not a zone's URL");
    assert_eq!(p["disks"][0]["initializeParams"]["diskType"], "pd-ssd");
    assert_eq!(p["labels"]["gce-backend-config"], "linux");
    assert_eq!(p["metadata"]["items"][0]["key"], "swarming-server");
    assert!(p.get("name").is_none());
    let decoded: google_cloud_compute_v1::model::InstanceTemplate = serde_json::from_value(v).unwrap();
    assert_eq!(decoded.name.as_deref(), Some("linux-0123abcd"), "the official client reads it");
    let props = decoded.properties.unwrap();
    assert_eq!(props.machine_type.as_deref(), Some("e2-small"));
    assert_eq!(props.labels.get("gce-backend").map(String::as_str), Some("prod"));
}

#[test]
fn a_bulk_from_a_template_sends_only_what_differs() {
    let made =
        TemplateSpec { name: "linux-0123abcd".into(), description: String::new(), instance: pool_spec() };
    let mut instance = pool_spec();
    instance.labels.insert("gce-backend-batch".into(), "rid".into());
    // Another zone of the Config: types by name are the same.
    instance.attributes.machine_type = "zones/y/machineTypes/e2-small".into();
    let names = vec!["linux-0-abcd".to_owned()];
    let b = bulk(&BulkSpec { instance, names, template: Some(made) });
    assert_eq!(b["sourceInstanceTemplate"], "global/instanceTemplates/linux-0123abcd");
    assert_eq!(b["instanceProperties"], serde_json::json!({"labels": {"gce-backend-batch": "rid"}}));
    let decoded: google_cloud_compute_v1::model::BulkInsertInstanceResource =
        serde_json::from_value(b).unwrap();
    assert_eq!(decoded.source_instance_template.as_deref(), Some("global/instanceTemplates/linux-0123abcd"));
    let p = decoded.instance_properties.unwrap();
    assert_eq!(p.labels.len(), 1, "only the batch label: the rest comes from the template");
}

#[test]
fn a_bulk_that_would_remove_a_template_field_sends_the_whole_instance() {
    let made =
        TemplateSpec { name: "linux-0123abcd".into(), description: String::new(), instance: pool_spec() };
    // Made standard (a Spot failover): the template's scheduling would have to go.
    let mut instance = pool_spec();
    instance.attributes = instance.attributes.standard();
    let b = bulk(&BulkSpec {
        instance: instance.clone(),
        names: vec!["linux-0-abcd".into()],
        template: Some(made),
    });
    assert!(b.get("sourceInstanceTemplate").is_none());
    assert_eq!(b["instanceProperties"], properties(&instance));
    assert_eq!(b["instanceProperties"]["machineType"], "e2-small");
}
