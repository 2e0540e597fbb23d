//! The service the browser tests drive: `gce-backend run` spawned as a process (its settings
//! with fast cron and timings, its tokens and a configs directory in a temporary directory) on a
//! private Redis, against an in-process simulator whose faults a test sets; the API as the admin.

use std::path::PathBuf;
use std::process::{Child, Stdio};

use gce_backend_queues::testing::eventually;
use serde_json::Value;

use super::webdriver;
use crate::support::tokens::{ADMIN, write_tokens};
use crate::support::{Procs, free_port, pool};

/// `gce-backend run` as a process on its own Redis, against an in-process simulator.
pub(crate) struct Service {
    pub(crate) child: Child,
    pub(crate) root: String,
    sim_url: String,
    /// The configs directory it imports.
    pub(crate) configs: PathBuf,
    dir: PathBuf,
    /// Its Redis and simulator, kept while it runs.
    procs: Procs,
}

impl Service {
    /// Starts the service with fast cron and timings; `create_instance` gives up after two runs.
    pub(crate) async fn start() -> Service {
        let procs = Procs::start(
            8,
            "[timing]\nwatch = \"1s\"\nbot_grace = \"3s\"\nobservation_ttl = \"2s\"\nbackoff_base = \"1s\"\n\
             backoff_cap = \"2s\"\n[queues.create_instance]\nmax_attempts = 2\nbackoff_base = \"300ms\"\n\
             backoff_cap = \"1s\"\n",
        )
        .await;
        let tokens = write_tokens(&procs.dir);
        let port = free_port();
        let root = format!("http://127.0.0.1:{port}");
        let log = std::fs::File::create(procs.dir.join("service.log")).unwrap();
        let child = procs
            .command()
            .args(["--listen", &format!("127.0.0.1:{port}"), "--root-url", &root])
            .arg("--tokens")
            .arg(&tokens)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let (sim_url, configs, dir) =
            (format!("http://{}", procs.addr), procs.configs.clone(), procs.dir.clone());
        let svc = Service { child, root, sim_url, configs, dir, procs };
        let ready = format!("the service to get ready (its log: {})", svc.dir.display());
        eventually(&ready, webdriver::WAIT, || async {
            let status = reqwest::get(format!("{}/readyz", svc.root)).await.map(|r| r.status().as_u16());
            (status.ok() == Some(200)).then_some(())
        })
        .await;
        svc
    }

    /// Writes (or replaces) a Config file, owned by the groups `owner`.
    pub(crate) fn write_pool(&self, prefix: &str, amount: u32, owner: &[&str]) {
        let mut yaml = pool(prefix, amount, "1d", "10m");
        if !owner.is_empty() {
            yaml.push_str(&format!("owner: [{}]\n", owner.join(", ")));
        }
        self.write_yaml(prefix, &yaml);
    }

    /// Writes (or replaces) Config file `prefix.yaml` with `yaml`, at once (a rename).
    pub(crate) fn write_yaml(&self, prefix: &str, yaml: &str) {
        let tmp = self.dir.join(format!("{prefix}.yaml.tmp"));
        std::fs::write(&tmp, yaml).unwrap();
        std::fs::rename(&tmp, self.configs.join(format!("{prefix}.yaml"))).unwrap();
    }

    /// Sets the simulator's faults.
    pub(crate) async fn faults(&self, patch: Value) {
        let res =
            reqwest::Client::new().post(format!("{}/sim/faults", self.sim_url)).json(&patch).send().await;
        assert!(res.unwrap().status().is_success());
    }

    /// Pushes a task with `key` and `payload` onto `queue` on the service's Redis (a payload
    /// the service cannot read fails for good: the task dies at its first run).
    pub(crate) async fn push(&self, queue: &str, key: &str, payload: Value) {
        let ctx = self.procs.ctx().await;
        ctx.queues.get(queue).push(key, &payload, gce_backend_queues::When::Now).await.unwrap();
    }

    /// A GET of the API as the admin.
    pub(crate) async fn get(&self, path: &str) -> Value {
        let res = reqwest::Client::new()
            .get(format!("{}/api/gce-backend/v1/{path}", self.root))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "GET {path}: {}", res.status());
        res.json().await.unwrap()
    }

    /// A POST to the API as the admin.
    pub(crate) async fn post(&self, path: &str) -> Value {
        let res = reqwest::Client::new()
            .post(format!("{}/api/gce-backend/v1/{path}", self.root))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "POST {path}: {}", res.status());
        res.json().await.unwrap()
    }

    /// The ids of the dead tasks of `queue`, as the API lists them (every page).
    pub(crate) async fn dead_ids(&self, queue: &str) -> Vec<String> {
        let mut ids = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let token = next.map(|t| format!("&continuationToken={t}")).unwrap_or_default();
            let page = self.get(&format!("queues/{queue}/dead?limit=100{token}")).await;
            ids.extend(
                page["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|t| t["task_id"].as_str().map(str::to_owned)),
            );
            match page["continuationToken"].as_str() {
                Some(t) => next = Some(t.to_owned()),
                None => return ids,
            }
        }
    }

    /// Waits until Config `prefix` has `n` VMs created (the API's count).
    pub(crate) async fn wait_created(&self, prefix: &str, n: u64) {
        eventually(&format!("{prefix}: {n} VMs created"), webdriver::WAIT, || async {
            let v = self.get(&format!("configs/{prefix}")).await;
            (v["status"]["counts"]["created"] == n).then_some(())
        })
        .await;
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
