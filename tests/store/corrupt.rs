//! Corrupt records are confined to their entity: a record that does not decode is reported on its
//! own Config (or VM) and every other one reads on, in memory, on Redis and in key layout 2.

use std::sync::Arc;

use gce_backend_jobs::ports::store::Store;

use super::*;

/// Corrupt records, planted as a raw write would leave them (a garbage value over the JSON;
/// versions and index entries stay), are confined to their entity on both stores.
async fn corrupt(store: Arc<dyn Store>, plant: impl Fn(&str, &str)) {
    let rec = ConfigRecord {
        config: config("linux", 2),
        revision: "a".into(),
        current_amount: 2,
        source: "linux.yaml".into(),
        verified: true,
        ..Default::default()
    };
    assert!(store.put_config(&rec, Expect::Absent).await.unwrap());
    let mac = ConfigRecord { config: config("mac", 1), ..rec.clone() };
    assert!(store.put_config(&mac, Expect::Absent).await.unwrap());
    let (ctx, _) = Ctx::test();
    let vm = gce_backend_jobs::model::Vm {
        id: "linux-0".into(),
        config: "linux".into(),
        hostname: "linux-0-abcd".into(),
        configured: ctx.now(),
        ..Default::default()
    };
    assert!(store.put_vm(&vm, Expect::Absent).await.unwrap());
    let other = gce_backend_jobs::model::Vm {
        id: "linux-1".into(),
        index: 1,
        hostname: "linux-1-abcd".into(),
        ..vm.clone()
    };
    assert!(store.put_vm(&other, Expect::Absent).await.unwrap());
    plant("cfg", "linux");
    plant("vm", "linux-0");
    // Listing skips what does not decode; the rest reads as usual.
    let listed: Vec<String> =
        store.configs().await.unwrap().into_iter().map(|c| c.value.config.prefix).collect();
    assert_eq!(listed, ["mac"]);
    let corrupt = store.corrupt_configs().await.unwrap();
    assert_eq!((corrupt.len(), corrupt[0].key.as_str(), corrupt[0].version), (1, "linux", 1));
    assert!(matches!(
        store.config("linux").await,
        Err(gce_backend_jobs::ports::store::StoreError::Corrupt { .. })
    ));
    assert!(matches!(
        store.vm("linux-0").await,
        Err(gce_backend_jobs::ports::store::StoreError::Corrupt { .. })
    ));
    assert_eq!(store.vm("linux-1").await.unwrap().unwrap().value.hostname, "linux-1-abcd");
    assert_eq!(store.vm_version("linux-0").await.unwrap(), Some(1));
    // Status carries on for every Config.
    let report = gce_backend_jobs::fleet::status::report(
        &*store,
        &*ctx.ports.buckets,
        &[],
        ctx.now(),
        chrono::Duration::zero(),
        true,
        &ctx.settings.trust,
    )
    .await
    .unwrap();
    let states: Vec<(String, String)> = report
        .configs
        .iter()
        .map(|c| (c.prefix.clone(), serde_json::to_value(c.state).unwrap().as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(states, [("linux".into(), "corrupt".into()), ("mac".into(), "active".into())]);
    // A corrupt record is replaced by naming its version, or deleted.
    assert!(store.put_config(&rec, Expect::Version(1)).await.unwrap());
    assert_eq!(store.config("linux").await.unwrap().unwrap().value.current_amount, 2);
    assert!(store.delete_vm("linux-0", 1).await.unwrap());
    assert_eq!(store.vm_ids(VmIndex::OfConfig("linux".into())).await.unwrap(), ["linux-1"]);
    let hosts = store.vms_by_hostname(&["linux-0-abcd".into(), "linux-1-abcd".into()]).await.unwrap();
    assert_eq!(hosts, [None, Some("linux-1".into())], "its hostname no longer maps to it");
    // A VM index key of the wrong type is an error of that Config only, being healed.
    plant("index", "linux");
    assert!(matches!(
        store.vm_ids(VmIndex::OfConfig("linux".into())).await,
        Err(gce_backend_jobs::ports::store::StoreError::Healing { .. })
    ));
    assert_eq!(
        store.heal_requests().await.unwrap(),
        [gce_backend_jobs::ports::store::Scope::Config("linux".into())]
    );
    assert!(store.vm_ids(VmIndex::OfConfig("mac".into())).await.unwrap().is_empty());
    // A global pause that does not decode is reported (and read as a pause by the service),
    // and replaced by the next one set.
    plant("pause", "");
    assert!(matches!(
        store.global_pause().await,
        Err(gce_backend_jobs::ports::store::StoreError::Corrupt { .. })
    ));
    let paused = gce_backend_jobs::safety::pause::global(&*store).await.unwrap().expect("fails safe");
    assert!(paused.reason.contains("does not decode"), "{paused:?}");
    store.set_global_pause(None).await.unwrap();
    assert_eq!(store.global_pause().await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_records_are_confined_to_their_entity_in_memory() {
    let store = Arc::new(MemoryStore::new());
    let m = store.clone();
    corrupt(store, move |kind, key| match kind {
        "cfg" => m.plant_corrupt_config(key),
        "vm" => m.plant_corrupt_vm(key),
        "pause" => m.plant_corrupt_pause(),
        _ => m.plant_broken_index(key),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_records_are_confined_to_their_entity_in_redis() {
    let server = RedisServer::start();
    let url = server.url();
    let store = Arc::new(RedisStore::connect(&url, "test").await.unwrap());
    corrupt(store, move |kind, key| {
        let (cmd, k, args): (&str, String, Vec<&str>) = match kind {
            "cfg" => ("HSET", "{test:db}:cfg".into(), vec![key, "{garbage"]),
            "vm" => ("HSET", "{test:db}:vm".into(), vec![key, "{garbage"]),
            "pause" => ("SET", "{test:db}:pause".into(), vec!["{garbage"]),
            _ => ("SET", format!("{{test:db}}:vm:cfg:{key}"), vec!["x"]),
        };
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut conn = client.get_connection().unwrap();
        let _: () = redis::cmd(cmd).arg(k).arg(args).query(&mut conn).unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_records_are_confined_to_their_entity_in_layout_2() {
    let server = RedisServer::start();
    let url = server.url();
    let store = in_layout_2(&url).await;
    corrupt(store, move |kind, key| {
        let (cmd, k, args): (&str, String, Vec<&str>) = match kind {
            "cfg" => ("HSET", "{test:db}:cfg".into(), vec![key, "{garbage"]),
            "vm" => ("HSET", "{test:c:linux}:vm".into(), vec![key, "{garbage"]),
            "pause" => ("SET", "{test:db}:paused".into(), vec!["{garbage"]),
            _ => ("SET", format!("{{test:c:{key}}}:uncreated"), vec!["x"]),
        };
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut conn = client.get_connection().unwrap();
        let _: () = redis::cmd(cmd).arg(k).arg(args).query(&mut conn).unwrap();
    })
    .await;
}
