//! The dashboard in a real browser: the `gce-backend` binary on a private Redis and the
//! simulator, Debian's headless Chromium driven over WebDriver. A Config converges on the page
//! without a reload; an insert fault makes a retry and a dead task appear; Retry takes it out of
//! the dead set; a reader sees no buttons; a bad token gets the form back with the API's message;
//! when the service goes away a banner says so and the last data stays.

mod webdriver;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gce_backend::sim::{self, Sim};
use gce_backend_queues::testing::RedisServer;
use serde_json::{Value, json};

use crate::api::{ADMIN, WRITER};
use crate::pipeline::{Backend, DEPLOYMENT, Env, pool, sim_config, temp_dir};
use webdriver::{Browser, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_gce-backend");
const READER: &str = "gbt_reader_infra";

/// `gce-backend run` as a process on its own Redis, against an in-process simulator.
struct Service {
    child: Child,
    root: String,
    sim_url: String,
    configs: PathBuf,
    dir: PathBuf,
    _sim: Sim,
    _redis: RedisServer,
}

impl Service {
    /// Starts the service with fast cron and timings; `create_instance` gives up after two runs.
    async fn start() -> Service {
        gce_backend::adapters::install_crypto();
        let redis = RedisServer::start();
        let (addr, sim) = sim::spawn(sim_config()).await.unwrap();
        let dir = temp_dir();
        let configs = dir.join("pools");
        std::fs::create_dir_all(&configs).unwrap();
        let settings = dir.join("service.toml");
        let mut toml = format!("deployment = \"{DEPLOYMENT}\"\nconcurrency = 8\n[cron]\n");
        for job in gce_backend_jobs::cron::names() {
            toml.push_str(&format!("{job} = \"1s\"\n"));
        }
        toml.push_str(
            "[timing]\nwatch = \"1s\"\nbot_grace = \"3s\"\nobservation_ttl = \"2s\"\nbackoff_base = \"1s\"\n\
             backoff_cap = \"2s\"\n[queues.create_instance]\nmax_attempts = 2\nbackoff_base = \"300ms\"\n\
             backoff_cap = \"1s\"\n",
        );
        std::fs::write(&settings, toml).unwrap();
        let tokens = crate::api::write_tokens(&dir);
        let port = free_port();
        let root = format!("http://127.0.0.1:{port}");
        let log = std::fs::File::create(dir.join("service.log")).unwrap();
        let child = Command::new(BIN)
            .args(["run", "--quiet", "--redis", &redis.url(), "--namespace", DEPLOYMENT])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--root-url", &root])
            .args(["--gce-endpoint", &format!("http://{addr}")])
            .arg("--configs")
            .arg(&configs)
            .arg("--settings")
            .arg(&settings)
            .arg("--tokens")
            .arg(&tokens)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let svc = Service {
            child,
            root,
            sim_url: format!("http://{addr}"),
            configs,
            dir,
            _sim: sim,
            _redis: redis,
        };
        let started = Instant::now();
        while reqwest::get(format!("{}/readyz", svc.root)).await.map(|r| r.status().as_u16()).ok()
            != Some(200)
        {
            assert!(
                started.elapsed() < webdriver::WAIT,
                "the service did not get ready: see {}",
                svc.dir.display()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        svc
    }

    /// Writes (or replaces) a Config file.
    fn write_pool(&self, prefix: &str, amount: u32) {
        let tmp = self.dir.join(format!("{prefix}.yaml.tmp"));
        std::fs::write(&tmp, pool(prefix, amount, "1d", "10m")).unwrap();
        std::fs::rename(&tmp, self.configs.join(format!("{prefix}.yaml"))).unwrap();
    }

    /// Sets the simulator's faults.
    async fn faults(&self, patch: Value) {
        let res =
            reqwest::Client::new().post(format!("{}/sim/faults", self.sim_url)).json(&patch).send().await;
        assert!(res.unwrap().status().is_success());
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("the service's log: {}", self.dir.join("service.log").display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A script returning the text of `field` in the row whose `attr` is `key` (null while absent).
const CELL: &str = "const r = document.querySelector(`tr[${arguments[0]}=\"${arguments[1]}\"]`); \
                    const c = r && r.querySelector(`[data-field=\"${arguments[2]}\"]`); return c ? c.textContent : null;";

/// Waits until the cell reads `want`.
async fn wait_cell(b: &Browser, attr: &str, key: &str, field: &str, want: &str) {
    let check =
        CELL.replace("return c ? c.textContent : null;", "return c && c.textContent === arguments[3];");
    b.wait(&format!("{attr}={key} {field} reads {want}"), &check, json!([attr, key, field, want])).await;
}

/// Asserts the page was never reloaded since the marker was set.
async fn still_same_page(b: &Browser) {
    let v = b
        .js(
            "return [window.__marker === 'kept', performance.getEntriesByType('navigation').length];",
            json!([]),
        )
        .await;
    assert_eq!(v, json!([true, 1]), "the page was reloaded (marker, navigations)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_follows_a_config_live_and_retries_a_dead_task() {
    webdriver::require_browser();
    let mut svc = Service::start().await;
    let b = Browser::start().await;
    b.goto(&format!("{}/ui/#token={ADMIN}", svc.root)).await;
    b.wait(
        "signed in as admin",
        "return document.querySelector('#who-name').textContent.includes('admin');",
        json!([]),
    )
    .await;
    let hash = b.js("return location.hash;", json!([])).await;
    assert_eq!(hash, "#/", "the token left the URL");
    b.js("window.__marker = 'kept';", json!([])).await;
    b.wait("no Config yet", "return !document.querySelector('#no-configs').hidden;", json!([])).await;

    // A Config appears and converges while the page stays loaded.
    svc.write_pool("linux", 3);
    wait_cell(&b, "data-config", "linux", "configured", "3").await;
    wait_cell(&b, "data-config", "linux", "connected", "3").await;
    still_same_page(&b).await;

    // Its page: three VMs, each bot connected.
    b.click(&b.find("tr[data-config=\"linux\"] [data-field=\"prefix\"] a").await).await;
    b.wait(
        "three connected VMs",
        "const b = [...document.querySelectorAll('#vms tr[data-vm] [data-field=\"bot\"]')]; \
         return b.length === 3 && b.every(c => c.textContent === 'connected');",
        json!([]),
    )
    .await;

    // Every insert fails (503): create_instance retries, then gives up and its task is dead.
    svc.faults(json!({"errors": {"compute.instances.insert": {"rate": 1.0, "status": 503}}})).await;
    svc.write_pool("linux", 4);
    b.click(&b.find("a[data-nav=\"queues\"]").await).await;
    b.wait(
        "create_instance retried",
        &CELL.replace("return c ? c.textContent : null;", "return c && Number(c.textContent) > 0;"),
        json!(["data-queue", "create_instance", "retried"]),
    )
    .await;
    let task = b
        .wait(
            "a dead create_instance task of linux-3",
            "const r = [...document.querySelectorAll('#dead tr[data-task]')].find(r => \
               r.querySelector('[data-field=\"queue\"]').textContent === 'create_instance' && \
               r.querySelector('[data-field=\"key\"]').textContent === 'linux-3'); \
             return r ? r.getAttribute('data-task') : null;",
            json!([]),
        )
        .await;
    let task = task.as_str().unwrap().to_owned();
    let row = format!("#dead tr[data-task=\"{task}\"]");
    let error = b.text(&b.find(&format!("{row} [data-field=\"last-error\"]")).await).await;
    assert!(!error.is_empty(), "the dead task shows its last error");
    b.find(&format!("{row} button[data-action=\"retry\"]")).await;
    b.find("tr[data-queue=\"create_instance\"] button[data-action=\"purge-dead\"]").await;
    still_same_page(&b).await;

    // Signed out, a bad token gets the form back with the API's message.
    b.click(&b.find("#sign-out").await).await;
    b.wait("the sign-in form", "return !document.querySelector('#view-login').hidden;", json!([])).await;
    b.type_in(&b.find("#token-input").await, "gbt_nope").await;
    b.click(&b.find("[data-testid=\"sign-in\"]").await).await;
    let msg = b
        .wait(
            "the API's message on the form",
            "const e = document.querySelector('#login-error'); \
             return !document.querySelector('#view-login').hidden && !e.hidden && e.textContent;",
            json!([]),
        )
        .await;
    assert!(msg.as_str().unwrap().contains("unknown token"), "{msg}");

    // A reader sees the dead task, no button, and "read-only".
    b.type_in(&b.find("#token-input").await, READER).await;
    b.click(&b.find("[data-testid=\"sign-in\"]").await).await;
    b.find(&row).await;
    b.wait("read-only shown", "return !document.querySelector('#read-only').hidden;", json!([])).await;
    let who = b.text(&b.find("#who-name").await).await;
    assert!(who.contains("reader"), "{who}");
    assert!(b.find_all("button[data-action]").await.is_empty(), "a reader gets no buttons");

    // A writer may retry only the tasks of Configs its groups own: linux has no owner.
    b.click(&b.find("#sign-out").await).await;
    b.type_in(&b.find("#token-input").await, WRITER).await;
    b.click(&b.find("[data-testid=\"sign-in\"]").await).await;
    b.wait(
        "signed in as a writer",
        "return document.querySelector('#who-name').textContent.includes('writer');",
        json!([]),
    )
    .await;
    b.find(&row).await;
    assert!(b.find_all("#read-only:not([hidden])").await.is_empty(), "a writer is not read-only");
    assert!(b.find_all("button[data-action]").await.is_empty(), "no button on another's task");

    // The admin again: the fault is lifted, Retry takes the task out of the dead set.
    b.click(&b.find("#sign-out").await).await;
    b.type_in(&b.find("#token-input").await, ADMIN).await;
    b.click(&b.find("[data-testid=\"sign-in\"]").await).await;
    let retry = b.find(&format!("{row} button[data-action=\"retry\"]")).await;
    assert!(b.find_all("#read-only:not([hidden])").await.is_empty(), "an admin is not read-only");
    svc.faults(json!({"errors": {}})).await;
    b.click(&retry).await;
    b.wait("the task left the dead set", "return !document.querySelector(arguments[0]);", json!([row])).await;
    // The API agrees (it ran again, or a newer task of the same key superseded it).
    let dead: Value = reqwest::Client::new()
        .get(format!("{}/api/gce-backend/v1/queues/create_instance/dead", svc.root))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> =
        dead["tasks"].as_array().unwrap().iter().filter_map(|t| t["task_id"].as_str()).collect();
    assert!(!ids.contains(&task.as_str()), "{task} is still dead: {dead}");

    // Any other dead task of the queue: "retry all", confirmed.
    if !b.find_all("tr[data-queue=\"create_instance\"] button[data-action=\"retry-all\"]").await.is_empty() {
        b.click(&b.find("tr[data-queue=\"create_instance\"] button[data-action=\"retry-all\"]").await).await;
        b.accept_alert().await;
        wait_cell(&b, "data-queue", "create_instance", "dead", "0").await;
    }
    b.click(&b.find("a[data-nav=\"overview\"]").await).await;
    wait_cell(&b, "data-config", "linux", "connected", "4").await;
    still_same_page(&b).await;
    // The service goes away: a banner says so, the last data stays.
    let _ = svc.child.kill();
    let _ = svc.child.wait();
    let msg = b
        .wait(
            "the error banner",
            "const e = document.querySelector('#banner'); return !e.hidden && e.textContent;",
            json!([]),
        )
        .await;
    assert!(msg.as_str().unwrap().contains("Cannot reach the API"), "{msg}");
    assert_eq!(b.find_all("tr[data-config=\"linux\"]").await.len(), 1, "the last data stays");
    still_same_page(&b).await;
    let png = b.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n"), "a PNG of the page");
    b.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_is_served_without_a_token_and_whoami_names_the_caller() {
    let env = Env::start(Backend::Memory, sim_config(), &[], false).await;
    let root = crate::api::serve(env.ctx.clone()).await;
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    for path in ["/", "/ui"] {
        let res = http.get(format!("{root}{path}")).send().await.unwrap();
        assert!(res.status().is_redirection(), "{path}: {}", res.status());
        assert_eq!(res.headers()["location"], "ui/", "{path}");
    }
    for (path, kind, has) in [
        ("/ui/", "text/html", "app.js"),
        ("/ui/app.js", "text/javascript", "whoami"),
        ("/ui/lib.js", "text/javascript", "continuationToken"),
        ("/ui/style.css", "text/css", ".grid"),
    ] {
        let res = http.get(format!("{root}{path}")).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let h = res.headers().clone();
        assert!(h["content-type"].to_str().unwrap().starts_with(kind), "{path}: {h:?}");
        assert_eq!(h["cache-control"], "no-cache", "{path}");
        assert!(res.text().await.unwrap().contains(has), "{path}");
    }
    let res = http.get(format!("{root}/ui/nope.js")).send().await.unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(res.json::<Value>().await.unwrap()["code"], "ResourceNotFound");
    let api = crate::api::Client::new(&root).await;
    let v = api.ok(READER, "whoami", &[], None).await;
    assert_eq!(v, json!({"name": "reader-infra", "role": "reader", "groups": ["infra"]}));
    let (status, v) = api.call(Some("gbt_nope"), "whoami", &[], None).await;
    assert_eq!((status, v["message"].as_str()), (401, Some("unknown token")));
}
