//! A plan tells what happens, on Redis and the simulator: for each kind of change (the amount up
//! and down, an instance attribute, the provider, a schedule window, a static pool's list) the
//! plan is taken, the change applied, the service run until the pool matches its record, and
//! what happened (VMs made, drained for good, made again under their id, left as they were, made
//! for a rollout's surge only) is compared with the plan exactly.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{Datelike, Timelike};
use gce_backend_jobs::model::outdated;
use gce_backend_jobs::{naming::vm_id, naming::vm_id_of};
use gce_backend_queues::testing::eventually;
use serde_json::{Value, json};

use crate::api::{Client, WRITER, config};
use crate::support::{Backend, Env, settings, sim_config};

/// How long a change may take to settle (a rolling update replaces one VM at a time).
const LIMIT: Duration = Duration::from_secs(120);
const SERVER: &str = "https://swarm.example.com";

/// The pool before a change: VM id → hostname, and every hostname ever inserted.
struct Before {
    hosts: BTreeMap<String, String>,
    inserted: BTreeSet<String>,
}

async fn before(env: &Env, prefix: &str) -> Before {
    let hosts = env.vms(prefix).await.into_iter().map(|v| (v.id, v.hostname)).collect();
    Before { hosts, inserted: env.inserts().into_keys().collect() }
}

/// Waits until `prefix`'s pool matches its record: no rollout or provider change going on,
/// exactly the VMs it wants, each connected, not drained, made from its attributes by its
/// provider (a static pool's: on its listed hostname).
async fn settled(env: &Env, prefix: &str) {
    eventually(&format!("{prefix} settles"), LIMIT, || async {
        let rec = env.ctx.ports.store.config(prefix).await.unwrap()?.value;
        if rec.rollout.is_some() || rec.provider_changed.is_some() {
            return None;
        }
        let vms = env.vms(prefix).await;
        let ids: BTreeSet<String> = vms.iter().map(|v| v.id.clone()).collect();
        let want: BTreeSet<String> = rec.wanted().into_iter().map(|i| vm_id(prefix, i)).collect();
        let providers = env.ctx.providers.declared();
        let fine = |v: &gce_backend_jobs::model::Vm| {
            v.healthy_connected()
                && !v.drained
                && rec.keeps(v, providers)
                && !outdated(&rec.config, v)
                && (!rec.config.is_static() || rec.listed.slots.get(&v.index) == Some(&v.hostname))
        };
        (ids == want && vms.iter().all(fine)).then_some(())
    })
    .await;
}

/// What happened to `prefix` since `was`, in a plan's words, compared with `plan`: the VMs
/// made, drained, made again (in the plan's order, by when each new one was made), kept, and
/// made for the surge only.
async fn compare(env: &Env, prefix: &str, was: &Before, plan: &Value) {
    let now: BTreeMap<String, (String, chrono::DateTime<chrono::Utc>)> =
        env.vms(prefix).await.into_iter().map(|v| (v.id, (v.hostname, v.configured))).collect();
    let ids = |k: &Value| -> BTreeSet<String> {
        k.as_array().into_iter().flatten().map(|v| v.as_str().unwrap().to_owned()).collect()
    };
    let created: BTreeSet<String> = now.keys().filter(|id| !was.hosts.contains_key(*id)).cloned().collect();
    let drained: BTreeSet<String> = was.hosts.keys().filter(|id| !now.contains_key(*id)).cloned().collect();
    let (mut replaced, mut kept) = (Vec::new(), BTreeSet::new());
    for (id, host) in &was.hosts {
        match now.get(id) {
            Some((h, made)) if h != host => replaced.push((*made, id.clone())),
            Some(_) => {
                kept.insert(id.clone());
            }
            None => {}
        }
    }
    replaced.sort();
    let replaced: Vec<String> = replaced.into_iter().map(|(_, id)| id).collect();
    // Every instance inserted since, by VM id: those made, made again, and a surge's.
    let inserted: BTreeSet<String> = env
        .inserts()
        .into_keys()
        .filter(|h| !was.inserted.contains(h))
        .filter_map(|h| vm_id_of(&h).map(str::to_owned))
        .filter(|id| id.starts_with(&format!("{prefix}-")))
        .collect();
    let surge: BTreeSet<String> = inserted.iter().filter(|id| !now.contains_key(*id)).cloned().collect();
    let recycled: BTreeSet<String> =
        plan["recycle"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    let planned_replace: Vec<String> =
        plan["replace"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
    assert_eq!(created, ids(&plan["create"]), "created, planned: {plan:#}");
    assert_eq!(drained, ids(&plan["drain"]), "drained, planned: {plan:#}");
    assert_eq!(replaced, planned_replace, "replaced, in order, planned: {plan:#}");
    assert_eq!(kept, &ids(&plan["keep"]) | &recycled, "kept, planned: {plan:#}");
    assert_eq!(surge, ids(&plan["replacement"]["surge"]), "made for the surge only, planned: {plan:#}");
    let static_pool = env.ctx.ports.store.config(prefix).await.unwrap().unwrap().value.config.is_static();
    if !static_pool {
        let made: BTreeSet<String> = &(&created | &surge) | &replaced.iter().cloned().collect();
        assert_eq!(inserted, made, "every insert is one the plan named");
    }
    assert_eq!(now.len() as u64, plan["amount"].as_u64().unwrap(), "{plan:#}");
}

/// A service with its API, and a Config `web` of 1 to 6 VMs made over it, set to `amount` and
/// converged.
async fn web(amount: u32, s: gce_backend::settings::Settings) -> (Env, Client) {
    let env = Env::start_with(Backend::Redis, sim_config(), &[], true, s).await;
    let api = Client::new(env.api_url.as_deref().unwrap()).await;
    api.ok(WRITER, "createConfig", &[("prefix", "web")], Some(config("web", &["infra"], 1, 6))).await;
    api.ok(WRITER, "updateAmount", &[("prefix", "web")], Some(json!({"amount": amount}))).await;
    env.converged("web", amount).await;
    (env, api)
}

/// Plans `body` (a planConfig input) for `web`, applies it by `method` with `input`, settles,
/// and compares; returns the plan.
async fn plan_apply_compare(env: &Env, api: &Client, body: Value, method: &str, input: Value) -> Value {
    plan_apply_compare_of(env, api, "web", body, method, input).await
}

/// [`plan_apply_compare`] for the Config `prefix`.
async fn plan_apply_compare_of(
    env: &Env,
    api: &Client,
    prefix: &str,
    body: Value,
    method: &str,
    input: Value,
) -> Value {
    let p = [("prefix", prefix)];
    let was = before(env, prefix).await;
    let plan = api.ok(WRITER, "planConfig", &p, Some(body)).await;
    assert_eq!(plan["problems"], json!([]), "{plan:#}");
    api.ok(WRITER, method, &p, Some(input)).await;
    settled(env, prefix).await;
    compare(env, prefix, &was, &plan).await;
    plan
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raising_the_amount_creates_what_the_plan_says() {
    let (env, api) = web(1, settings()).await;
    let plan =
        plan_apply_compare(&env, &api, json!({"amount": 3}), "updateAmount", json!({"amount": 3})).await;
    assert_eq!((plan["create"].clone(), plan["keep"].clone()), (json!(["web-1", "web-2"]), json!(["web-0"])));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowering_the_amount_drains_what_the_plan_says() {
    let (env, api) = web(3, settings()).await;
    let plan =
        plan_apply_compare(&env, &api, json!({"amount": 1}), "updateAmount", json!({"amount": 1})).await;
    // Two go, idle first (the bots are idle: the longest idle, then the highest index).
    assert_eq!(plan["drain"].as_array().map(Vec::len), Some(2), "{plan:#}");
    // The VM kept may be any of the three: the ids below it are let go, and listVms says so.
    let kept: Vec<u32> = env.vms("web").await.into_iter().filter(|v| !v.drained).map(|v| v.index).collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let list = api.ok(WRITER, "listVms", &[("prefix", "web")], None).await;
    let gaps: Vec<String> = (0..kept[0]).map(|i| format!("web-{i}")).collect();
    assert_eq!(list["letGo"], json!(gaps), "kept web-{}: {list:#}", kept[0]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_machine_type_replaces_every_vm_as_the_plan_says() {
    let (env, api) = web(3, settings()).await;
    let mut c = config("web", &["infra"], 1, 6);
    c["attributes"]["machine_type"] = json!("zones/{{.Zone}}/machineTypes/e2-standard-4");
    let plan = plan_apply_compare(&env, &api, json!({"config": c}), "updateConfig", c.clone()).await;
    assert_eq!(plan["replace"], json!(["web-0", "web-1", "web-2"]), "{plan:#}");
    assert_eq!(
        plan["replacement"],
        json!({"by": "rolling_update", "at_once": 1, "surge": ["web-3"], "min_connected": 3})
    );
    let all = env.vms("web").await;
    assert!(all.iter().all(|v| v.attributes.machine_type.ends_with("e2-standard-4")), "{all:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_provider_replaces_every_vm_as_the_plan_says() {
    let mut s = settings();
    s.providers = toml::from_str("[gce]\ntype = \"gce\"\n[gce-b]\ntype = \"gce\"\n").unwrap();
    let (env, api) = web(3, s).await;
    let mut c = config("web", &["infra"], 1, 6);
    c["provider"] = json!("gce-b");
    let plan = plan_apply_compare(&env, &api, json!({"config": c}), "updateConfig", c.clone()).await;
    assert_eq!(plan["replace"], json!(["web-0", "web-1", "web-2"]), "{plan:#}");
    assert_eq!(plan["replacement"]["by"], "provider_change");
    assert!(env.vms("web").await.iter().all(|v| v.provider == "gce-b"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_window_open_now_sets_the_amount_the_plan_says() {
    let (env, api) = web(1, settings()).await;
    // A window that opened an hour ago, for three hours: at least 3 VMs.
    let start = env.ctx.now() - chrono::Duration::hours(1);
    let day = gce_backend_jobs::config::Day::ALL[start.weekday().num_days_from_monday() as usize].name();
    let mut c = config("web", &["infra"], 1, 6);
    c["amount"]["change"] = json!([{
        "start": {"day": day, "time": format!("{}:{:02}", start.hour(), start.minute())},
        "length": "3h", "min": 3, "max": 6,
    }]);
    let plan = plan_apply_compare(&env, &api, json!({"config": c}), "updateConfig", c.clone()).await;
    assert_eq!((plan["amount"].clone(), plan["create"].clone()), (json!(3), json!(["web-1", "web-2"])));
    env.stop().await;
}

fn lab(machines: &[&str]) -> Value {
    json!({"prefix": "lab", "provider": "lab", "machines": machines, "timeout": "10m",
           "swarming": SERVER, "owner": ["infra"]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_a_static_list_drains_and_adds_what_the_plan_says() {
    let mut s = settings();
    s.providers = toml::from_str("[gce]\ntype = \"gce\"\n[lab]\ntype = \"static\"\n").unwrap();
    let env = Env::start_with(Backend::Redis, sim_config(), &[], true, s).await;
    env.sim_machines(SERVER, &["mac-1", "mac-2", "mac-3"]).await;
    let api = Client::new(env.api_url.as_deref().unwrap()).await;
    let p = [("prefix", "lab")];
    api.ok(WRITER, "createConfig", &p, Some(lab(&["mac-1", "mac-2"]))).await;
    env.converged("lab", 2).await;

    let edited = lab(&["mac-3", "mac-2"]);
    let body = json!({"config": edited});
    let plan = plan_apply_compare_of(&env, &api, "lab", body, "updateConfig", edited.clone()).await;
    assert_eq!(
        (plan["drain"].clone(), plan["create"].clone(), plan["keep"].clone()),
        (json!(["lab-0"]), json!(["lab-2"]), json!(["lab-1"]))
    );
    env.stop().await;
}
