//! The service in process: a simulator over HTTP, a private `redis-server` or the embedded
//! default, a configs directory and the tests' tokens; with or without its workers, and what a
//! test reads back (counts, VMs, the simulator's instances, bots and inserts).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use gce_backend::server::{self, App, Role, RunOptions};
use gce_backend::settings::Settings;
use gce_backend::sim::admin::state_json;
use gce_backend::sim::{self, Sim, SimConfig};
use gce_backend_jobs::Ctx;
use gce_backend_jobs::model::{Counts, Vm};
use gce_backend_jobs::ports::store::VmIndex;
use gce_backend_queues::testing::{Cluster, RedisServer, Sentinels, eventually};
use serde_json::Value;

use super::fixtures::{DEPLOYMENT, settings};

/// How long [`Env::converged`] waits.
const LIMIT: Duration = Duration::from_secs(60);

/// Where the service keeps its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// A private `redis-server`.
    Redis,
    /// A private `redis-server` that speaks TLS only (`rediss://`, a CA the test made).
    Tls,
    /// A primary and a replica behind three sentinels (`redis+sentinel://`).
    Sentinel,
    /// A three-primary cluster (`redis+cluster://`).
    Cluster,
    /// A three-primary cluster, its store moved to key layout 2 (each Config's keys under its own
    /// hash tag) before the service starts.
    ClusterLayout2,
    /// The embedded in-memory default.
    Memory,
}

/// The service, its simulator, its Redis and its configs directory.
pub(crate) struct Env {
    pub(crate) app: Option<App>,
    pub(crate) ctx: Ctx,
    pub(crate) sim: Sim,
    pub(crate) sim_url: String,
    pub(crate) dir: PathBuf,
    /// Where the service's API listens (with workers).
    pub(crate) api_url: Option<String>,
    pub(crate) _redis: Option<RedisServer>,
    /// The servers of the other Redis backends.
    pub(crate) servers: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Env {
    /// Starts a simulator, then the service (unless `workers` is false: context only).
    pub(crate) async fn start(
        backend: Backend,
        sim_cfg: SimConfig,
        pools: &[(&str, String)],
        workers: bool,
    ) -> Env {
        Env::start_with(backend, sim_cfg, pools, workers, settings()).await
    }

    /// [`Env::start`] with other settings.
    pub(crate) async fn start_with(
        backend: Backend,
        sim_cfg: SimConfig,
        pools: &[(&str, String)],
        workers: bool,
        settings: Settings,
    ) -> Env {
        gce_backend::adapters::install_crypto();
        let dir = super::host::temp_dir();
        for (name, yaml) in pools {
            std::fs::write(dir.join(format!("{name}.yaml")), yaml).unwrap();
        }
        let (addr, sim) = sim::spawn(sim_cfg).await.unwrap();
        let sim_url = format!("http://{addr}");
        let redis = (backend == Backend::Redis).then(RedisServer::start);
        let (url, servers): (Option<String>, Option<Box<dyn std::any::Any + Send + Sync>>) = match backend {
            Backend::Memory => (None, None),
            Backend::Redis => (redis.as_ref().map(RedisServer::url), None),
            Backend::Tls => {
                let s = RedisServer::start_tls();
                (Some(s.url()), Some(Box::new(s)))
            }
            Backend::Sentinel => {
                let s = Sentinels::start();
                (Some(s.url()), Some(Box::new(s)))
            }
            Backend::Cluster | Backend::ClusterLayout2 => {
                let c = Cluster::start(3, 0);
                (Some(c.url()), Some(Box::new(c)))
            }
        };
        if backend == Backend::ClusterLayout2 {
            let store =
                gce_backend::adapters::redis_store::RedisStore::connect(url.as_deref().unwrap(), DEPLOYMENT)
                    .await
                    .unwrap();
            let moved = store.migrate(true, Duration::ZERO).await.unwrap();
            assert_eq!(moved.to, "2", "{moved:?}");
        }
        let opts = RunOptions {
            store: gce_backend::server::RedisArgs { redis: url, namespace: DEPLOYMENT.into() },
            role: Role::All,
            configs: dir.clone(),
            settings: PathBuf::new(),
            gce_endpoint: Some(sim_url.clone()),
            swarming_endpoint: None,
            real_gce: false,
            google_credentials: None,
            certs_url: None,
            quiet: true,
            api: gce_backend::server::ApiArgs {
                tokens: Some(super::tokens::write_tokens(&dir)),
                ..Default::default()
            },
        };
        let (app, ctx) = if workers {
            let app = server::start(&opts, settings).await.unwrap();
            let ctx = app.ctx.clone();
            (Some(app), ctx)
        } else {
            (None, server::context(&opts, &settings).await.unwrap().0)
        };
        let api_url = app.as_ref().and_then(|a| a.api.as_ref()).map(|(addr, _)| format!("http://{addr}"));
        Env { app, ctx, sim, sim_url, dir, api_url, _redis: redis, servers }
    }

    /// Writes (or replaces) Config file `name.yaml` in the configs directory.
    pub(crate) fn write_pool(&self, name: &str, yaml: &str) {
        std::fs::write(self.dir.join(format!("{name}.yaml")), yaml).unwrap();
    }

    /// `prefix`'s counts now, from the store.
    pub(crate) async fn counts(&self, prefix: &str) -> Counts {
        gce_backend_jobs::records::counts::tally(&*self.ctx.ports.store, prefix, self.ctx.now())
            .await
            .unwrap()
            .0
    }

    /// `prefix`'s status now: its counts live (`live`) or as `count_vms` last wrote them.
    pub(crate) async fn status(&self, prefix: &str, live: bool) -> gce_backend_jobs::model::ConfigStatus {
        let (store, now) = (&*self.ctx.ports.store, self.ctx.now());
        gce_backend_jobs::fleet::status::status(store, prefix, now, chrono::Duration::zero(), live)
            .await
            .unwrap()
    }

    /// What `gce-backend status` prints: counts live (`live`) or as `count_vms` last wrote them.
    pub(crate) async fn report(&self, live: bool) -> gce_backend_jobs::fleet::status::Report {
        let (store, buckets, now) = (&*self.ctx.ports.store, &*self.ctx.ports.buckets, self.ctx.now());
        gce_backend_jobs::fleet::status::report(
            store,
            buckets,
            &[],
            now,
            chrono::Duration::zero(),
            live,
            &self.ctx.settings.trust,
        )
        .await
        .unwrap()
    }

    /// Adds static machines `hostnames` to the simulator, their bots of Swarming `server`.
    pub(crate) async fn sim_machines(&self, server: &str, hostnames: &[&str]) {
        let added = reqwest::Client::new()
            .post(format!("{}/sim/machines", self.sim_url))
            .json(&serde_json::json!({"server": server, "hostnames": hostnames}))
            .send()
            .await
            .unwrap();
        assert_eq!(added.status(), 200);
    }

    /// Waits until `prefix` has `n` VMs, all created and connected, none draining.
    pub(crate) async fn converged(&self, prefix: &str, n: u32) {
        eventually(&format!("{prefix} converges to {n}"), LIMIT, || async {
            let c = self.counts(prefix).await;
            let vms = self.vms(prefix).await.len() as u32;
            (c.configured == n && c.created == n && c.connected == n && c.draining == 0 && vms == n)
                .then_some(())
        })
        .await;
    }

    /// `prefix`'s VM records.
    pub(crate) async fn vms(&self, prefix: &str) -> Vec<Vm> {
        let mut out = Vec::new();
        for id in self.ctx.ports.store.vm_ids(VmIndex::OfConfig(prefix.into())).await.unwrap() {
            if let Some(v) = self.ctx.ports.store.vm(&id).await.unwrap() {
                out.push(v.value);
            }
        }
        out
    }

    /// The simulator's whole state (instances, bots, operations, inserts).
    pub(crate) fn state(&self) -> Value {
        self.sim.with(|w| state_json(w))
    }

    /// Sim instances of `prefix`: name → status.
    pub(crate) fn instances(&self, prefix: &str) -> BTreeMap<String, String> {
        let state = self.state();
        state["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["name"].as_str().unwrap().starts_with(&format!("{prefix}-")))
            .map(|i| (i["name"].as_str().unwrap().to_owned(), i["status"].as_str().unwrap().to_owned()))
            .collect()
    }

    /// Sim bots: id → bot JSON.
    pub(crate) fn bots(&self) -> BTreeMap<String, Value> {
        let state = self.state();
        state["bots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["botId"].as_str().unwrap().to_owned(), b.clone()))
            .collect()
    }

    /// Sets the simulator's faults.
    pub(crate) async fn faults(&self, body: Value) {
        let r = reqwest::Client::new()
            .post(format!("{}/sim/faults", self.sim_url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    }

    /// Every hostname ever inserted and the requestIds used for it.
    pub(crate) fn inserts(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.state()["inserts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let ids = i["requestIds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r.as_str().unwrap().to_owned())
                    .collect();
                (i["name"].as_str().unwrap().to_owned(), ids)
            })
            .collect()
    }

    /// Stops the service and removes its directory.
    pub(crate) async fn stop(mut self) {
        if let Some(app) = self.app.take() {
            app.stop().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
