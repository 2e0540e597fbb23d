//! The simulator's Compute Engine REST, driven through the official google-cloud-compute-v1
//! client: idempotent insert and delete, 409/404, instance and operation lifecycles, list paging
//! and filters, zones and regions, quota and stockout operation errors, and error codes as the
//! client exposes them.

use std::time::Duration;

use crate::support::eventually;
use gce_backend_sim::SimConfig;
use google_cloud_compute_v1::errors::OperationError;
use google_cloud_compute_v1::model::instance::Status;
use google_cloud_gax::paginator::Paginator;
use google_cloud_lro::Poller;
use serde_json::json;

use crate::support::{SimHandle, http_error, instance, quick, rid, start};

const P: &str = "proj";
const Z: &str = "us-central1-b";

async fn status_of(s: &SimHandle, name: &str) -> Option<Status> {
    let c = s.instances().await;
    c.get().set_project(P).set_zone(Z).set_instance(name).send().await.ok().and_then(|i| i.status)
}

async fn create(s: &SimHandle, name: &str, labels: &[(&str, &str)]) {
    s.create(name, Some(rid(&format!("create-{name}"))), labels, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_with_the_same_request_id_returns_the_same_operation_and_one_instance() {
    let s = start(quick()).await;
    let c = s.instances().await;
    let id = rid("create-vm-1");
    let insert = || {
        c.insert().set_project(P).set_zone(Z).set_request_id(&id).set_body(instance(
            "vm-1",
            "e2-small",
            &[],
            None,
        ))
    };
    let first = insert().send().await.unwrap();
    assert_eq!(first.status.as_ref().map(|s| s.name()), Some(Some("PENDING")));
    let again = insert().send().await.unwrap();
    assert_eq!(first.name, again.name, "same requestId, same operation");
    let done = insert().poller().until_done().await.unwrap().to_result().unwrap();
    assert_eq!(done.name, first.name);
    assert_eq!(done.client_operation_id.as_deref(), Some(id.as_str()));

    let state = s.admin_get("/sim/state").await;
    assert_eq!(state["instances"].as_array().unwrap().len(), 1);
    assert_eq!(state["inserts"][0]["requestIds"], json!([id]), "the replays did no new insert");
    assert_eq!(s.calls("compute.instances.insert", 200).await, 3);

    // A different requestId for an existing name: 409 alreadyExists.
    let err = c
        .insert()
        .set_project(P)
        .set_zone(Z)
        .set_request_id(rid("other"))
        .set_body(instance("vm-1", "e2-small", &[], None))
        .send()
        .await
        .unwrap_err();
    assert_eq!(http_error(&err), (Some(409), Some("alreadyExists".into())));
    // A requestId that is not a UUID: 400.
    let err = c
        .insert()
        .set_project(P)
        .set_zone(Z)
        .set_request_id("not-a-uuid")
        .set_body(instance("vm-2", "e2-small", &[], None))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.http_status_code(), Some(400));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_boots_through_provisioning_and_staging_and_carries_its_fields() {
    let s = start(SimConfig { provision_ms: 300, stage_ms: 300, ..quick() }).await;
    let c = s.instances().await;
    c.insert()
        .set_project(P)
        .set_zone(Z)
        .set_request_id(rid("boot"))
        .set_body(instance("vm-boot", "e2-small", &[("pool", "a")], Some("https://swarm.example.com")))
        .send()
        .await
        .unwrap();
    assert_eq!(status_of(&s, "vm-boot").await, Some(Status::Provisioning));
    eventually("STAGING", Duration::from_secs(10), || async {
        (status_of(&s, "vm-boot").await == Some(Status::Staging)).then_some(())
    })
    .await;
    eventually("RUNNING", Duration::from_secs(10), || async {
        (status_of(&s, "vm-boot").await == Some(Status::Running)).then_some(())
    })
    .await;
    let i = c.get().set_project(P).set_zone(Z).set_instance("vm-boot").send().await.unwrap();
    assert!(i.id.is_some_and(|id| id > 0));
    assert!(i.creation_timestamp.is_some_and(|t| chrono::DateTime::parse_from_rfc3339(&t).is_ok()));
    assert!(i.self_link.unwrap().ends_with("/projects/proj/zones/us-central1-b/instances/vm-boot"));
    assert_eq!(i.labels.get("pool").map(String::as_str), Some("a"));
    let items = i.metadata.unwrap().items;
    assert!(items.iter().any(|m| m.key.as_deref() == Some("swarming-server")));
    let nic = &i.network_interfaces[0];
    assert!(nic.network_ip.as_ref().is_some_and(|ip| ip.starts_with("10.")));
    assert!(nic.access_configs[0].nat_ip.as_ref().is_some_and(|ip| !ip.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_is_idempotent_by_request_id_and_a_missing_instance_is_404() {
    let s = start(SimConfig { stop_ms: 300, ..quick() }).await;
    create(&s, "vm-del", &[]).await;
    let c = s.instances().await;
    let id = rid("destroy-vm-del");
    let delete = || c.delete().set_project(P).set_zone(Z).set_instance("vm-del").set_request_id(&id);
    let first = delete().send().await.unwrap();
    assert_eq!(status_of(&s, "vm-del").await, Some(Status::Stopping));
    let again = delete().send().await.unwrap();
    assert_eq!(first.name, again.name);
    eventually("TERMINATED before it is gone", Duration::from_secs(10), || async {
        (status_of(&s, "vm-del").await == Some(Status::Terminated)).then_some(())
    })
    .await;
    delete().poller().until_done().await.unwrap().to_result().unwrap();
    let err = c.get().set_project(P).set_zone(Z).set_instance("vm-del").send().await.unwrap_err();
    assert_eq!(http_error(&err), (Some(404), Some("notFound".into())));
    let err =
        c.delete().set_project(P).set_zone(Z).set_instance("vm-del").set_request_id(rid("x")).send().await;
    assert_eq!(http_error(&err.unwrap_err()), (Some(404), Some("notFound".into())));
    assert_eq!(s.admin_get("/sim/state").await["instances"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_and_filters_on_name_and_labels() {
    let s = start(quick()).await;
    for n in 0..25 {
        let pool = if n % 2 == 0 { "a" } else { "b" };
        create(&s, &format!("vm-{n:02}"), &[("pool", pool)]).await;
    }
    let c = s.instances().await;
    let mut pages = c.list().set_project(P).set_zone(Z).set_max_results(10u32).by_page();
    let mut sizes = Vec::new();
    let mut names = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.unwrap();
        sizes.push(page.items.len());
        names.extend(page.items.into_iter().filter_map(|i| i.name));
    }
    assert_eq!(sizes, [10, 10, 5]);
    let expected: Vec<String> = (0..25).map(|n| format!("vm-{n:02}")).collect();
    assert_eq!(names, expected, "every instance once, in name order");

    let count = |filter: &'static str| {
        let c = c.clone();
        async move {
            let page = c.list().set_project(P).set_zone(Z).set_filter(filter).send().await.unwrap();
            page.items.len()
        }
    };
    assert_eq!(count(r#"labels.pool = "a""#).await, 13);
    assert_eq!(count(r#"(labels.pool = "b") (name != "vm-01")"#).await, 11);
    assert_eq!(count(r#"name = "vm-03""#).await, 1);
    assert_eq!(count("name eq vm-0.*").await, 10);
    assert_eq!(count("labels.owner:*").await, 0);
    let err = c.list().set_project(P).set_zone(Z).set_filter("zone = x").send().await.unwrap_err();
    assert_eq!(err.http_status_code(), Some(400));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_operations_get_and_wait_follow_pending_running_done() {
    let s = start(SimConfig { op_ms: 600, ..quick() }).await;
    let c = s.instances().await;
    let op = c
        .insert()
        .set_project(P)
        .set_zone(Z)
        .set_request_id(rid("op"))
        .set_body(instance("vm-op", "e2-small", &[], None))
        .send()
        .await
        .unwrap();
    let name = op.name.unwrap();
    let ops = s.operations().await;
    let got = ops.get().set_project(P).set_zone(Z).set_operation(&name).send().await.unwrap();
    assert_eq!(got.status.and_then(|s| s.name().map(str::to_owned)).as_deref(), Some("PENDING"));
    let waited = ops.wait().set_project(P).set_zone(Z).set_operation(&name).send().await.unwrap();
    assert_eq!(waited.status.and_then(|s| s.name().map(str::to_owned)).as_deref(), Some("DONE"));
    assert!(waited.end_time.is_some() && waited.start_time.is_some());
    let err = ops.get().set_project(P).set_zone(Z).set_operation("operation-nope").send().await.unwrap_err();
    assert_eq!(err.http_status_code(), Some(404));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zones_and_regions_list_with_quota_usage() {
    let s = start(quick()).await;
    create(&s, "vm-a", &[]).await;
    create(&s, "vm-b", &[]).await;
    let zones = s.zones().await.list().set_project(P).send().await.unwrap();
    let names: Vec<String> = zones.items.into_iter().filter_map(|z| z.name).collect();
    assert!(names.contains(&Z.to_owned()) && names.contains(&"europe-west1-b".to_owned()));
    let regions = s.regions().await.list().set_project(P).send().await.unwrap();
    let r = regions.items.iter().find(|r| r.name.as_deref() == Some("us-central1")).unwrap();
    let cpus = r.quotas.iter().find(|q| q.metric.as_ref().and_then(|m| m.name()) == Some("CPUS")).unwrap();
    assert_eq!(cpus.usage, Some(4.0), "two e2-small are 4 CPUs");
    let inst =
        r.quotas.iter().find(|q| q.metric.as_ref().and_then(|m| m.name()) == Some("INSTANCES")).unwrap();
    assert_eq!(inst.usage, Some(2.0));
}

async fn failed_insert(s: &SimHandle, name: &str, zone: &str) -> (Option<i32>, String) {
    let c = s.instances().await;
    let mut body = instance(name, "e2-small", &[], None);
    body.machine_type = Some(format!("zones/{zone}/machineTypes/e2-small"));
    let op = c
        .insert()
        .set_project(P)
        .set_zone(zone)
        .set_request_id(rid(name))
        .set_body(body)
        .poller()
        .until_done()
        .await
        .expect("the poller answers Ok even for a failed operation");
    match op.to_result() {
        Err(OperationError::Generic(e)) => {
            let code = e.details.unwrap().errors[0].code.clone().unwrap();
            (e.status_code, code)
        }
        other => panic!("expected an operation error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_exceeded_is_an_operation_error_and_leaves_no_instance() {
    let s = start(quick()).await;
    let (st, _) =
        s.admin_post("/sim/faults", json!({"quotas": {"us-central1": {"cpus": 4.0, "instances": 10}}})).await;
    assert_eq!(st, 200);
    create(&s, "vm-1", &[]).await;
    create(&s, "vm-2", &[]).await;
    assert_eq!(failed_insert(&s, "vm-3", Z).await, (Some(403), "QUOTA_EXCEEDED".into()));
    assert_eq!(status_of(&s, "vm-3").await, None, "a failed insert leaves no instance");
    // Freed quota lets the next insert through.
    let c = s.instances().await;
    c.delete().set_project(P).set_zone(Z).set_instance("vm-1").poller().until_done().await.unwrap();
    create(&s, "vm-4", &[]).await;
    // Another project has its own quota.
    let regions = s.regions().await.list().set_project(P).send().await.unwrap();
    let r = regions.items.iter().find(|r| r.name.as_deref() == Some("us-central1")).unwrap();
    let cpus = r.quotas.iter().find(|q| q.metric.as_ref().and_then(|m| m.name()) == Some("CPUS")).unwrap();
    assert_eq!((cpus.limit, cpus.usage), (Some(4.0), Some(4.0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stockout_zone_fails_inserts_with_zone_resource_pool_exhausted() {
    let s = start(SimConfig {
        faults: serde_json::from_str(r#"{"stockout_zones":["us-east1-b"]}"#)
            .map(|p| {
                let mut f = gce_backend_sim::Faults::default();
                f.apply(p).unwrap();
                f
            })
            .unwrap(),
        ..quick()
    })
    .await;
    assert_eq!(
        failed_insert(&s, "vm-x", "us-east1-b").await,
        (Some(503), "ZONE_RESOURCE_POOL_EXHAUSTED".into())
    );
    create(&s, "vm-y", &[]).await; // other zones are fine
    s.admin_post("/sim/faults", json!({"stockout_zones": []})).await;
    let c = s.instances().await;
    let mut body = instance("vm-z", "e2-small", &[], None);
    body.machine_type = Some("zones/us-east1-b/machineTypes/e2-small".into());
    let op = c.insert().set_project(P).set_zone("us-east1-b").set_body(body).poller().until_done().await;
    op.unwrap().to_result().expect("capacity is back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_codes_surface_through_the_client_as_compute_sends_them() {
    let s = start(quick()).await;
    let c = s.instances().await;
    let insert = |name: &str| {
        c.insert().set_project(P).set_zone(Z).set_request_id(rid(name)).set_body(instance(
            name,
            "e2-small",
            &[],
            None,
        ))
    };
    let set = |errors: serde_json::Value| s.admin_post("/sim/faults", json!({ "errors": errors }));

    set(json!({"compute.instances.insert": {"rate": 1.0, "status": 403}})).await;
    let err = insert("vm-1").send().await.unwrap_err();
    assert_eq!(http_error(&err), (Some(403), Some("rateLimitExceeded".into())), "a rate limit, not a quota");

    set(json!({"compute.instances.insert": {"rate": 1.0, "status": 503}})).await;
    let err = insert("vm-1").send().await.unwrap_err();
    assert_eq!(err.http_status_code(), Some(503));
    assert_eq!(s.calls("compute.instances.insert", 503).await, 1, "POST is not retried by the client");

    set(json!({"compute.instances.get": {"rate": 1.0, "status": 429}})).await;
    let err = c.get().set_project(P).set_zone(Z).set_instance("vm-1").send().await.unwrap_err();
    assert_eq!(http_error(&err), (Some(429), Some("rateLimitExceeded".into())));
    assert_eq!(s.calls("compute.instances.get", 429).await, 1, "429 is not retried");

    set(json!({"compute.instances.get": {"rate": 1.0, "status": 503}})).await;
    let err = c.get().set_project(P).set_zone(Z).set_instance("vm-1").send().await.unwrap_err();
    assert_eq!(err.http_status_code(), Some(503));
    assert!(s.calls("compute.instances.get", 503).await > 1, "GET on 503 is retried by the client");

    set(json!({})).await;
    let err = c.get().set_project(P).set_zone(Z).set_instance("vm-1").send().await.unwrap_err();
    assert_eq!(http_error(&err), (Some(404), Some("notFound".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_change_at_run_time_and_bad_settings_are_refused() {
    let s = start(quick()).await;
    let (st, body) = s.admin_post("/sim/faults", json!({"never_boot_rate": 3})).await;
    assert_eq!(st, 400);
    assert!(body["error"].as_str().unwrap().contains("never_boot_rate"));
    let (st, _) = s.admin_post("/sim/faults", json!({"typo": 1})).await;
    assert_eq!(st, 400);
    let (st, now) =
        s.admin_post("/sim/faults", json!({"never_boot_rate": 1.0, "latency_ms": {"*": 5}})).await;
    assert_eq!((st, now["never_boot_rate"].as_f64()), (200, Some(1.0)));
    s.create("vm-stuck", None, &[], None).await;
    // Long past its boot time it is still STAGING.
    eventually("STAGING", Duration::from_secs(5), || async {
        (status_of(&s, "vm-stuck").await == Some(Status::Staging)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(status_of(&s, "vm-stuck").await, Some(Status::Staging));
    assert_eq!(s.admin_get("/sim/state").await["instances"][0]["neverBoots"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_gives_the_same_answers() {
    async fn run(seed: u64) -> Vec<(String, String)> {
        let s = start(SimConfig { seed, ..quick() }).await;
        for n in 0..5 {
            create(&s, &format!("vm-{n}"), &[]).await;
        }
        let c = s.instances().await;
        let page = c.list().set_project(P).set_zone(Z).send().await.unwrap();
        page.items
            .into_iter()
            .map(|i| (i.id.unwrap().to_string(), i.network_interfaces[0].network_ip.clone().unwrap()))
            .collect()
    }
    let (a, b, c) = (run(7).await, run(7).await, run(8).await);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempted_instance_stops_and_stays_terminated() {
    let s = start(quick()).await;
    create(&s, "vm-p", &[]).await;
    eventually("RUNNING", Duration::from_secs(5), || async {
        (status_of(&s, "vm-p").await == Some(Status::Running)).then_some(())
    })
    .await;
    let (st, _) = s.admin_post("/sim/preempt", json!({"project": P, "zone": Z, "name": "vm-p"})).await;
    assert_eq!(st, 200);
    eventually("TERMINATED", Duration::from_secs(5), || async {
        (status_of(&s, "vm-p").await == Some(Status::Terminated)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(status_of(&s, "vm-p").await, Some(Status::Terminated), "a preempted instance is not deleted");
    let (st, _) = s.admin_post("/sim/preempt", json!({"project": P, "zone": Z, "name": "nope"})).await;
    assert_eq!(st, 404);
}
