//! Instance templates on Redis and the simulator: a Config's template appears in Compute
//! (labelled ours, holding the Config's instance), bulk inserts name it (their instances carry
//! what only the template holds), and a changed Config gets a new template while the old one is
//! removed once no VM of its revision is left.

use std::collections::BTreeSet;
use std::time::Duration;

use gce_backend_jobs::config::Limits;
use gce_backend_jobs::providers::gce_template::{revision_label, template_name};
use gce_backend_queues::testing::eventually;
use serde_json::{Value, json};

use crate::support::{Backend, Env, pool, settings, sim_config};

const OLD: &str = "projects/debian-cloud/global/images/debian-12";
const NEW: &str = "projects/debian-cloud/global/images/debian-13";
/// A label only the template holds once the test marks it.
const MARK: &str = "made-from-template";

/// A pool of 4 to 16 VMs (4 at first) made from `image`, updated rolling.
fn tpl(image: &str) -> String {
    pool("tpl", 4, "1d", "10m").replace(OLD, image).replace("{min: 4, max: 4}", "{min: 4, max: 16}")
        + "update: {mode: rolling, max_surge: 4}\n"
}

/// The simulator's instance templates of the project, by name, over its HTTP API.
async fn listed(env: &Env) -> Vec<Value> {
    let url = format!("{}/compute/v1/projects/my-proj/global/instanceTemplates", env.sim_url);
    let body: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    body["items"].as_array().cloned().unwrap_or_default()
}

fn names(items: &[Value]) -> BTreeSet<String> {
    items.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

/// Calls the simulator answered, of `method`.
fn calls(env: &Env, method: &str) -> u64 {
    env.sim.with(|w| w.calls.get(method).map_or(0, |by| by.values().sum()))
}

/// The Config's revision now.
async fn revision(env: &Env) -> String {
    env.ctx.ports.store.config("tpl").await.unwrap().unwrap().value.revision
}

/// Waits until the Config's status names `name` as its only template, made, and Compute has it.
async fn only_template(env: &Env, name: &str) {
    eventually(&format!("{name} is the Config's only template"), Duration::from_secs(90), || async {
        let st = env.status("tpl", true).await;
        let shown: Vec<(&str, bool)> = st.resources.iter().map(|r| (r.name.as_str(), r.usable())).collect();
        (shown == [(name, true)] && names(&listed(env).await) == BTreeSet::from([name.to_owned()]))
            .then_some(())
    })
    .await;
}

/// The service on Redis and the simulator with the pool of `tpl(OLD)` converged (bulks from 2
/// VMs) and its template made; the template's name and the Config's revision.
async fn started() -> (Env, String, String) {
    let mut s = settings();
    s.limits = Limits { bulk_min: 2, ..Limits::default() };
    let env = Env::start_with(Backend::Redis, sim_config(), &[("tpl", tpl(OLD))], true, s).await;
    env.converged("tpl", 4).await;
    let first = revision(&env).await;
    let name = template_name("tpl", &first);
    only_template(&env, &name).await;
    (env, name, first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_s_template_is_made_named_by_its_bulks_and_replaced_with_its_revision() {
    let (env, name, first) = started().await;
    let t = listed(&env).await.into_iter().find(|t| t["name"] == name.as_str()).unwrap();
    let p = &t["properties"];
    assert_eq!(p["labels"]["gce-backend"], "e2e", "{t}");
    assert_eq!(p["labels"]["gce-backend-config"], "tpl");
    assert_eq!(p["labels"]["gce-backend-revision"], revision_label(&first).as_str());
    assert!(p["labels"].get("gce-backend-vm").is_none(), "no VM's label: {t}");
    assert_eq!(p["machineType"], "e2-standard-2", "zone-free: {t}");
    assert_eq!(p["disks"][0]["initializeParams"]["sourceImage"], OLD);

    // Mark the template in Compute (the same name, one label more), then grow the pool: the new
    // VMs are made in bulk, and their instances carry what only the template holds.
    let url = format!("{}/compute/v1/projects/my-proj/global/instanceTemplates", env.sim_url);
    let http = reqwest::Client::new();
    assert_eq!(http.delete(format!("{url}/{name}")).send().await.unwrap().status(), 200);
    let mut marked = p.clone();
    marked["labels"][MARK] = json!("yes");
    let r = http.post(&url).json(&json!({"name": name, "properties": marked})).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let before: BTreeSet<String> = env.vms("tpl").await.into_iter().map(|v| v.hostname).collect();
    let (inserts, bulks) =
        (calls(&env, "compute.instances.insert"), calls(&env, "compute.instances.bulkInsert"));
    gce_backend_jobs::operate::configs::set_amount(&env.ctx, "tpl", 16, "test").await.unwrap();
    env.converged("tpl", 16).await;
    let (fresh, marked) = env.sim.with(|w| {
        let fresh: Vec<_> =
            w.instances.iter().filter(|(k, _)| k.2.starts_with("tpl-") && !before.contains(&k.2)).collect();
        let marked = fresh.iter().filter(|(_, i)| i.labels.get(MARK).is_some_and(|v| v == "yes")).count();
        (fresh.len(), marked)
    });
    // Each made in bulk is made from the template; only one sent alone (a group of one) is not.
    let alone = calls(&env, "compute.instances.insert") - inserts;
    assert_eq!(fresh, 12);
    assert!(
        marked >= 2 && fresh - marked == alone as usize,
        "{marked} of {fresh} made from the template, {alone} alone"
    );
    assert!(calls(&env, "compute.instances.bulkInsert") > bulks, "made in bulk");

    // A changed Config: a new template; the old one goes once no VM of its revision is left.
    env.write_pool("tpl", &tpl(NEW));
    eventually("the new revision is imported", Duration::from_secs(30), || async {
        (revision(&env).await != first).then_some(())
    })
    .await;
    let second = revision(&env).await;
    let new_name = template_name("tpl", &second);
    assert_ne!(new_name, name);
    only_template(&env, &new_name).await;
    assert!(env.vms("tpl").await.iter().all(|v| v.revision == second), "its old VMs are gone first");
    let t = listed(&env).await.into_iter().find(|t| t["name"] == new_name.as_str()).unwrap();
    assert_eq!(t["properties"]["disks"][0]["initializeParams"]["sourceImage"], NEW);
    env.converged("tpl", 16).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_deleted_outside_is_made_again_and_the_pool_still_grows_in_bulk() {
    let (env, name, _) = started().await;
    // Someone deletes it in Compute; the pool then grows.
    let url = format!("{}/compute/v1/projects/my-proj/global/instanceTemplates/{name}", env.sim_url);
    assert_eq!(reqwest::Client::new().delete(url).send().await.unwrap().status(), 200);
    assert!(listed(&env).await.is_empty());
    let bulks = calls(&env, "compute.instances.bulkInsert");
    gce_backend_jobs::operate::configs::set_amount(&env.ctx, "tpl", 12, "test").await.unwrap();
    env.converged("tpl", 12).await;
    assert!(calls(&env, "compute.instances.bulkInsert") > bulks, "still made in bulk");
    // It is made again, and the Config's status said why.
    only_template(&env, &name).await;
    let errors = env.ctx.ports.store.errors("tpl").await.unwrap();
    assert!(
        errors.iter().any(|e| e.message.contains(&format!("instance template {name} is gone"))),
        "{errors:?}"
    );
    env.stop().await;
}
