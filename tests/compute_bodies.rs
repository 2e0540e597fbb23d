//! What our Compute adapter sends, decoded as Compute's own types: the adapter's instances.insert,
//! instanceTemplates.insert and bulkInsert (with and without a template) of a Config using every
//! instance attribute, against the simulator (which refuses a field Compute's schema does not
//! have, so each call must be answered 200), each body recorded as the simulator received it and
//! decoded with the official client's model: every typed field is the one the Config asked for,
//! and no field is one the client does not know.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use gce_backend::adapters::gce::Gce;
use gce_backend_jobs::config::Config;
use gce_backend_jobs::ports::compute::{BulkSpec, Compute, InstanceSpec, TemplateSpec};
use google_cloud_compute_v1::model::{self, attached_disk, network_interface, scheduling};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::support::sim_config;

const PROJECT: &str = "bodies-proj";
const ZONE: &str = "us-central1-b";
const SERVER: &str = "https://swarm.example.com";

/// A pool using every attribute an instance is made of.
const POOL: &str = "prefix: linux
amount: {min: 1, max: 1}
attributes:
  project: bodies-proj
  zone: us-central1-b
  machine_type: zones/us-central1-b/machineTypes/n2-standard-4
  disk:
  - {image: projects/debian-cloud/global/images/debian-12, size: 50, type: zones/us-central1-b/diskTypes/pd-ssd}
  - {size: 375, type: zones/us-central1-b/diskTypes/local-ssd, interface: NVME}
  - {size: 100, type: zones/us-central1-b/diskTypes/hyperdisk-balanced, provisioned_iops: 3000, provisioned_throughput: 140}
  network_interface:
  - {network: global/networks/default, subnetwork: regions/us-central1/subnetworks/bots, stack_type: IPV4_ONLY,
     access_config: [{type: ONE_TO_ONE_NAT}]}
  service_account:
  - {email: bots@bodies-proj.iam.gserviceaccount.com, scope: [https://www.googleapis.com/auth/cloud-platform,
     https://www.googleapis.com/auth/userinfo.email]}
  tag: [swarming, linux]
  min_cpu_platform: Intel Ice Lake
  scheduling: {node_affinity: [{key: pool, operator: IN, values: [ci, try]}]}
  label: {team: infra}
  enable_secure_boot: true
  disable_vtpm: true
  enable_confidential_compute: true
  provisioning_model: SPOT
  instance_termination_action: DELETE
lifetime: 1d
swarming: https://swarm.example.com
";

/// The bodies of the Compute calls the simulator received: (path, JSON, answer's status).
type Seen = Arc<Mutex<Vec<(String, Value, u16)>>>;

/// Records each Compute call's body on its way into the simulator, and the status it got.
async fn record(State(seen): State<Seen>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.expect("a body");
    let path = parts.uri.path().to_owned();
    let resp = next.run(Request::from_parts(parts, Body::from(bytes.clone()))).await;
    if path.starts_with("/compute/") && !bytes.is_empty() {
        let v = serde_json::from_slice(&bytes).expect("a JSON body");
        seen.lock().unwrap().push((path, v, resp.status().as_u16()));
    }
    resp
}

/// The simulator behind [`record`] on a free port, and the adapter pointed at it.
async fn started() -> (Gce, Seen) {
    let seen = Seen::default();
    let sim = gce_backend::sim::Sim::new(sim_config());
    let app = gce_backend::sim::router(sim).layer(middleware::from_fn_with_state(seen.clone(), record));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (Gce::connect(Some(&url), None).await.unwrap(), seen)
}

/// The one body recorded at `path` since the last call, taken by the simulator (200), decoded
/// as `T`; no field of it is one the official client does not know.
fn taken<T: DeserializeOwned + std::fmt::Debug>(seen: &Seen, path: &str) -> T {
    let mut seen = seen.lock().unwrap();
    let bodies: Vec<_> = seen.drain(..).collect();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let (at, v, status) = bodies.into_iter().next().unwrap();
    assert_eq!((at.as_str(), status), (path, 200), "{v}");
    let typed: T = serde_json::from_value(v).expect("Compute's type");
    assert!(!format!("{typed:?}").contains("_unknown_fields"), "a field the client does not know: {typed:?}");
    typed
}

fn spec(name: &str, extra: &[(&str, &str)]) -> InstanceSpec {
    let c = Config::parse(POOL, "bodies").unwrap();
    let mut labels: BTreeMap<String, String> =
        [("gce-backend", "e2e"), ("gce-backend-config", "linux")].map(|(k, v)| (k.into(), v.into())).into();
    labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    InstanceSpec {
        name: name.into(),
        attributes: c.attributes,
        metadata: vec![
            ("swarming-server".into(), SERVER.into()),
            ("startup-script".into(), "echo hi".into()),
        ],
        labels,
    }
}

fn labels(m: &std::collections::HashMap<String, String>) -> BTreeMap<&str, &str> {
    m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// The typed instance properties every call carries: the labels `expected`, and what [`POOL`]
/// asks for (`zonal`: machine and disk types as an insert gives them, else by name, as templates
/// and bulks do).
fn assert_instance(zonal: bool, p: &model::InstanceProperties, expected: &BTreeMap<&str, &str>) {
    assert_eq!(&labels(&p.labels), expected);
    let at = |path: &str| {
        if zonal { format!("zones/{ZONE}/{path}") } else { path.rsplit('/').next().unwrap().into() }
    };
    assert_eq!(p.machine_type.as_deref(), Some(at("machineTypes/n2-standard-4").as_str()));
    let disks = &p.disks;
    assert_eq!(disks.len(), 3);
    let boot = &disks[0];
    assert_eq!((boot.boot, boot.auto_delete), (Some(true), Some(true)));
    let init = boot.initialize_params.as_ref().unwrap();
    assert_eq!(init.source_image.as_deref(), Some("projects/debian-cloud/global/images/debian-12"));
    assert_eq!(init.disk_size_gb, Some(50));
    assert_eq!(init.disk_type.as_deref(), Some(at("diskTypes/pd-ssd").as_str()));
    let scratch = &disks[1];
    assert_eq!(scratch.boot, Some(false));
    assert_eq!(scratch.r#type, Some(attached_disk::Type::Scratch));
    assert_eq!(scratch.interface, Some(attached_disk::Interface::Nvme));
    let hyper = disks[2].initialize_params.as_ref().unwrap();
    assert_eq!((hyper.provisioned_iops, hyper.provisioned_throughput), (Some(3000), Some(140)));
    assert_eq!(hyper.disk_type.as_deref(), Some(at("diskTypes/hyperdisk-balanced").as_str()));

    assert_eq!(p.network_interfaces.len(), 1);
    let nic = &p.network_interfaces[0];
    assert_eq!(nic.network.as_deref(), Some("global/networks/default"));
    assert_eq!(nic.subnetwork.as_deref(), Some("regions/us-central1/subnetworks/bots"));
    assert_eq!(nic.stack_type, Some(network_interface::StackType::Ipv4Only));
    assert_eq!(nic.access_configs.len(), 1);
    assert_eq!(nic.access_configs[0].r#type, Some(model::access_config::Type::OneToOneNat));

    let accounts = &p.service_accounts;
    assert_eq!(accounts.len(), 1);
    assert_eq!(accounts[0].email.as_deref(), Some("bots@bodies-proj.iam.gserviceaccount.com"));
    let scopes =
        ["https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/userinfo.email"];
    assert_eq!(accounts[0].scopes, scopes);
    assert_eq!(p.tags.as_ref().unwrap().items, ["swarming", "linux"]);

    let s = p.scheduling.as_ref().unwrap();
    assert_eq!(s.provisioning_model, Some(scheduling::ProvisioningModel::Spot));
    assert_eq!(s.instance_termination_action, Some(scheduling::InstanceTerminationAction::Delete));
    assert_eq!(s.on_host_maintenance, Some(scheduling::OnHostMaintenance::Terminate));
    assert_eq!(s.automatic_restart, Some(false), "Spot instances cannot restart by themselves");
    assert_eq!(s.preemptible, None);
    let affinity = &s.node_affinities[0];
    assert_eq!(affinity.key.as_deref(), Some("pool"));
    assert_eq!(affinity.operator, Some(model::scheduling_node_affinity::Operator::In));
    assert_eq!(affinity.values, ["ci", "try"]);

    let sh = p.shielded_instance_config.as_ref().unwrap();
    let flags = (sh.enable_secure_boot, sh.enable_vtpm, sh.enable_integrity_monitoring);
    assert_eq!(flags, (Some(true), Some(false), Some(true)));
    assert_eq!(p.confidential_instance_config.as_ref().unwrap().enable_confidential_compute, Some(true));

    let items: Vec<(Option<&str>, Option<&str>)> =
        p.metadata.as_ref().unwrap().items.iter().map(|i| (i.key.as_deref(), i.value.as_deref())).collect();
    assert_eq!(items, [(Some("swarming-server"), Some(SERVER)), (Some("startup-script"), Some("echo hi"))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapter_s_insert_template_and_bulk_bodies_are_compute_s_typed_fields() {
    let (gce, seen) = started().await;
    let base = format!("/compute/v1/projects/{PROJECT}");
    let rid = |n: u8| format!("9f3c6a2e-1b4d-4c8e-9a7f-0d5e6b2c1a{n:02x}");

    let op = gce.insert(PROJECT, ZONE, &rid(1), &spec("linux-0-abcd", &[])).await;
    assert!(op.unwrap().error.is_none());
    let i: model::Instance = taken(&seen, &format!("{base}/zones/{ZONE}/instances"));
    assert_eq!(i.name.as_deref(), Some("linux-0-abcd"));
    // Its typed fields read as a template's or a bulk's properties (the name aside).
    let as_properties = serde_json::to_value(&i).and_then(serde_json::from_value).unwrap();
    let ours = BTreeMap::from([("gce-backend", "e2e"), ("gce-backend-config", "linux")]);
    assert_instance(true, &as_properties, &ours);

    let instance = spec("", &[]);
    let template = TemplateSpec { name: "linux-0123abcd".into(), description: "linux".into(), instance };
    let op = gce.insert_template(PROJECT, &rid(2), &template).await;
    assert!(op.unwrap().error.is_none());
    let t: model::InstanceTemplate = taken(&seen, &format!("{base}/global/instanceTemplates"));
    assert_eq!((t.name.as_deref(), t.description.as_deref()), (Some("linux-0123abcd"), Some("linux")));
    assert_instance(false, &t.properties.unwrap(), &ours);

    // From the template: only what differs (the batch's label) beside it.
    let names = vec!["linux-1-efgh".to_owned(), "linux-2-ijkl".to_owned()];
    let instance = spec("", &[("gce-backend-batch", "b1")]);
    let bulk = BulkSpec { instance: instance.clone(), names, template: Some(template) };
    let op = gce.bulk_insert(PROJECT, ZONE, &rid(3), &bulk).await;
    assert!(op.unwrap().error.is_none());
    let bulk_path = format!("{base}/zones/{ZONE}/instances/bulkInsert");
    let b: model::BulkInsertInstanceResource = taken(&seen, &bulk_path);
    assert_eq!((b.count, b.min_count), (Some(2), Some(1)));
    let mut listed: Vec<&str> = b.per_instance_properties.keys().map(String::as_str).collect();
    listed.sort_unstable();
    assert_eq!(listed, ["linux-1-efgh", "linux-2-ijkl"]);
    assert_eq!(b.source_instance_template.as_deref(), Some("global/instanceTemplates/linux-0123abcd"));
    let p = b.instance_properties.unwrap();
    assert_eq!(labels(&p.labels), BTreeMap::from([("gce-backend-batch", "b1")]));
    assert_eq!((p.machine_type, p.disks.len(), p.scheduling), (None, 0, None), "the rest is the template's");

    // Without one: the whole instance.
    let bulk = BulkSpec { instance, names: vec!["linux-3-mnop".to_owned()], template: None };
    let op = gce.bulk_insert(PROJECT, ZONE, &rid(4), &bulk).await;
    assert!(op.unwrap().error.is_none());
    let b: model::BulkInsertInstanceResource = taken(&seen, &bulk_path);
    assert_eq!((b.count, b.min_count, b.source_instance_template), (Some(1), Some(1), None));
    let mut batch = ours.clone();
    batch.insert("gce-backend-batch", "b1");
    assert_instance(false, &b.instance_properties.unwrap(), &batch);
}
