//! End-to-end tests of the reconcile pipeline: the service (in process, or as processes) on a
//! private `redis-server` (or the embedded in-memory default), against the simulator over HTTP
//! through the official Compute client and the pRPC Swarming client.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use gce_backend::server::{self, App, Role, RunOptions};
use gce_backend::settings::Settings;
use gce_backend::sim::admin::state_json;
use gce_backend::sim::{self, Sim, SimConfig};
use gce_backend_jobs::config::Secs;
use gce_backend_jobs::model::{Counts, Vm};
use gce_backend_jobs::ports::store::VmIndex;
use gce_backend_jobs::{Ctx, Timing};
use gce_backend_queues::testing::{RedisServer, eventually};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(60);
pub(crate) const DEPLOYMENT: &str = "e2e";

/// Where the service keeps its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Redis,
    Memory,
}

/// A Config file: `amount` e2-standard-2 VMs in us-central1-b.
pub(crate) fn pool(prefix: &str, amount: u32, lifetime: &str, timeout: &str) -> String {
    format!(
        r#"prefix: {prefix}
amount: {{min: {amount}, max: {amount}}}
attributes:
  project: my-proj
  zone: us-central1-b
  machine_type: "zones/{{{{.Zone}}}}/machineTypes/e2-standard-2"
  disk: [{{image: projects/debian-cloud/global/images/debian-12, size: 10, type: "zones/{{{{.Zone}}}}/diskTypes/pd-ssd"}}]
  network_interface: [{{network: global/networks/default, access_config: [{{type: ONE_TO_ONE_NAT}}]}}]
  label: {{team: e2e}}
lifetime: {lifetime}
timeout: {timeout}
swarming: https://swarm.example.com
"#
    )
}

/// Fast settings: every cron job each second, short timings.
pub(crate) fn settings() -> Settings {
    let mut s = Settings { deployment: DEPLOYMENT.into(), concurrency: 8, ..Settings::default() };
    for v in s.cron.values_mut() {
        *v = "1s".into();
    }
    s.timing = Timing {
        watch: Secs(1),
        bot_grace: Secs(3),
        observation_ttl: Secs(2),
        terminate_again_after: Secs(30),
        leak_grace: Secs(2),
        stale_bot_grace: Secs(2),
        backoff_base: Secs(1),
        backoff_cap: Secs(2),
        config_delete_grace: Secs(2),
        operation_poll: Secs(1),
        sweep: Secs(60),
        fan_out_jitter: Secs(1),
    };
    // The example server, and the misbehaving ones of `bad_input`.
    s.swarming.servers =
        ["swarm.example.com", "hang.example.com", "bad.example.com"].map(|h| format!("https://{h}")).into();
    s
}

/// Simulator timings for the tests.
pub(crate) fn sim_config() -> SimConfig {
    SimConfig {
        op_ms: 200,
        provision_ms: 100,
        stage_ms: 100,
        stop_ms: 100,
        bot_connect_ms: 200,
        bot_death_ms: 300,
        ..SimConfig::default()
    }
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
}

static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

pub(crate) fn temp_dir() -> PathBuf {
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("gce-backend-e2e-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
        let dir = temp_dir();
        for (name, yaml) in pools {
            std::fs::write(dir.join(format!("{name}.yaml")), yaml).unwrap();
        }
        let (addr, sim) = sim::spawn(sim_cfg).await.unwrap();
        let sim_url = format!("http://{addr}");
        let redis = (backend == Backend::Redis).then(RedisServer::start);
        let opts = RunOptions {
            store: gce_backend::server::RedisArgs {
                redis: redis.as_ref().map(RedisServer::url),
                namespace: DEPLOYMENT.into(),
            },
            role: Role::All,
            configs: dir.clone(),
            settings: PathBuf::new(),
            gce_endpoint: Some(sim_url.clone()),
            swarming_endpoint: None,
            real_gce: false,
            certs_url: None,
            quiet: true,
            api: gce_backend::server::ApiArgs {
                tokens: Some(crate::api::write_tokens(&dir)),
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
        Env { app, ctx, sim, sim_url, dir, api_url, _redis: redis }
    }

    pub(crate) fn write_pool(&self, name: &str, yaml: &str) {
        std::fs::write(self.dir.join(format!("{name}.yaml")), yaml).unwrap();
    }

    pub(crate) async fn counts(&self, prefix: &str) -> Counts {
        gce_backend_jobs::status::tally(&*self.ctx.store, prefix, self.ctx.now()).await.unwrap().0
    }

    /// `prefix`'s status now: its counts live (`live`) or as `count_vms` last wrote them.
    pub(crate) async fn status(&self, prefix: &str, live: bool) -> gce_backend_jobs::model::ConfigStatus {
        let (store, now) = (&*self.ctx.store, self.ctx.now());
        gce_backend_jobs::status::status(store, prefix, now, chrono::Duration::zero(), live).await.unwrap()
    }

    /// What `gce-backend status` prints: counts live (`live`) or as `count_vms` last wrote them.
    pub(crate) async fn report(&self, live: bool) -> gce_backend_jobs::status::Report {
        let (store, buckets, now) = (&*self.ctx.store, &*self.ctx.buckets, self.ctx.now());
        gce_backend_jobs::status::report(store, buckets, &[], now, chrono::Duration::zero(), live)
            .await
            .unwrap()
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

    pub(crate) async fn vms(&self, prefix: &str) -> Vec<Vm> {
        let mut out = Vec::new();
        for id in self.ctx.store.vm_ids(VmIndex::OfConfig(prefix.into())).await.unwrap() {
            if let Some(v) = self.ctx.store.vm(&id).await.unwrap() {
                out.push(v.value);
            }
        }
        out
    }

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

    pub(crate) async fn stop(mut self) {
        if let Some(app) = self.app.take() {
            app.stop().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every instance RUNNING and every bot alive, for `prefix`.
fn all_running(env: &Env, prefix: &str, n: usize) {
    let inst = env.instances(prefix);
    assert_eq!(inst.len(), n, "{inst:?}");
    assert!(inst.values().all(|s| s == "RUNNING"), "{inst:?}");
    let bots = env.bots();
    for name in inst.keys() {
        let b = &bots[name];
        assert!(b.get("isDead").is_none() && b.get("deleted").is_none(), "{b}");
    }
}

// ---- (i) ---------------------------------------------------------------------------------

async fn three_instances_run_and_three_bots_connect(backend: Backend) {
    let started = Instant::now();
    let env = Env::start(backend, sim_config(), &[("linux", pool("linux", 3, "1d", "10m"))], true).await;
    env.converged("linux", 3).await;
    eprintln!(
        "(i) {backend:?}: amount 3 converged (3 RUNNING, 3 bots connected) in {:.2?}",
        started.elapsed()
    );
    all_running(&env, "linux", 3);
    let vms = env.vms("linux").await;
    let ids: BTreeSet<&str> = vms.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, BTreeSet::from(["linux-0", "linux-1", "linux-2"]));
    for v in &vms {
        assert!(v.hostname.starts_with(&format!("{}-", v.id)) && v.hostname.len() == v.id.len() + 5);
        assert!(v.instance.as_ref().is_some_and(|i| !i.external_ip.is_empty()) && v.connected.is_some());
    }
    let state = env.state();
    let labels = &state["instances"][0]["labels"];
    assert_eq!(labels["gce-backend"], DEPLOYMENT);
    assert_eq!(labels["gce-backend-config"], "linux");
    assert_eq!(labels["team"], "e2e");
    env.stop().await;
}

// ---- (ii) --------------------------------------------------------------------------------

async fn shrinking_terminates_bots_after_their_task_and_deletes_everything(backend: Backend) {
    let cfg = SimConfig { bot_task_ms: 1500, bot_idle_ms: 300, ..sim_config() };
    let env = Env::start(backend, cfg, &[("linux", pool("linux", 3, "1d", "10m"))], true).await;
    env.converged("linux", 3).await;
    let before: BTreeMap<String, String> =
        env.vms("linux").await.into_iter().map(|v| (v.id, v.hostname)).collect();
    env.write_pool("linux", &pool("linux", 1, "1d", "10m"));
    env.converged("linux", 1).await;
    let after = env.vms("linux").await;
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].hostname, before["linux-0"], "the VM that stays is untouched");
    eventually("the removed instances are gone", LIMIT, || async {
        (env.instances("linux").len() == 1).then_some(())
    })
    .await;
    let bots = env.bots();
    for id in ["linux-1", "linux-2"] {
        let b = &bots[&before[id]];
        assert_eq!(b["deleted"], true, "{id}'s bot is deleted from Swarming: {b}");
        assert!(b["terminationTaskId"].is_string(), "{id}'s bot was terminated gracefully: {b}");
        assert!(env.ctx.store.vm(id).await.unwrap().is_none(), "{id}'s record is gone");
    }
    env.stop().await;
}

// ---- (iii) -------------------------------------------------------------------------------

async fn an_instance_past_its_lifetime_is_replaced_under_a_new_hostname(backend: Backend) {
    let env = Env::start(backend, sim_config(), &[("linux", pool("linux", 1, "4s", "10m"))], true).await;
    env.converged("linux", 1).await;
    let first = env.vms("linux").await[0].hostname.clone();
    let second = eventually("a new incarnation runs with a connected bot", LIMIT, || async {
        let vms = env.vms("linux").await;
        vms.first().filter(|v| v.hostname != first && v.connected.is_some()).map(|v| v.hostname.clone())
    })
    .await;
    assert!(second.starts_with("linux-0-"));
    eventually("the old instance is gone", LIMIT, || async {
        (!env.instances("linux").contains_key(&first)).then_some(())
    })
    .await;
    assert!(env.bots()[&first]["terminationTaskId"].is_string(), "the old bot was terminated first");
    env.stop().await;
}

// ---- (iv) --------------------------------------------------------------------------------

async fn an_instance_whose_bot_never_connects_is_destroyed_after_the_timeout(backend: Backend) {
    let env = Env::start(backend, sim_config(), &[], true).await;
    env.faults(json!({"bot_never_connect_rate": 1.0})).await;
    env.write_pool("linux", &pool("linux", 1, "1d", "3s"));
    let first = eventually("the first instance runs", LIMIT, || async {
        env.instances("linux").into_iter().find(|(_, s)| s == "RUNNING").map(|(n, _)| n)
    })
    .await;
    eventually("it is destroyed after the timeout", LIMIT, || async {
        let ops = env.state()["operations"].clone();
        let deleted =
            ops.as_array().unwrap().iter().any(|o| o["type"] == "delete" && o["target"] == first.as_str());
        (deleted && !env.instances("linux").contains_key(&first)).then_some(())
    })
    .await;
    let next = eventually("a new incarnation is created", LIMIT, || async {
        env.vms("linux")
            .await
            .first()
            .filter(|v| v.hostname != first && v.instance.is_some())
            .map(|v| v.hostname.clone())
    })
    .await;
    assert_ne!(next, first);
    assert!(env.counts("linux").await.connected == 0, "no bot ever connected");
    env.stop().await;
}

// ---- (v) ---------------------------------------------------------------------------------

async fn removing_a_config_file_removes_everything_of_that_config(backend: Backend) {
    let pools = [("linux", pool("linux", 2, "1d", "10m")), ("mac", pool("mac", 2, "1d", "10m"))];
    let env = Env::start(backend, sim_config(), &pools, true).await;
    env.converged("linux", 2).await;
    env.converged("mac", 2).await;
    let mac: Vec<String> = env.vms("mac").await.into_iter().map(|v| v.hostname).collect();
    std::fs::remove_file(env.dir.join("mac.yaml")).unwrap();
    eventually("everything of mac is gone", LIMIT, || async {
        let gone = env.instances("mac").is_empty()
            && env.vms("mac").await.is_empty()
            && env.ctx.store.config("mac").await.unwrap().is_none()
            && env.ctx.store.counts("mac").await.unwrap().is_none();
        gone.then_some(())
    })
    .await;
    let bots = env.bots();
    for h in &mac {
        assert_eq!(bots[h]["deleted"], true, "{h}");
    }
    all_running(&env, "linux", 2);
    env.converged("linux", 2).await;
    env.stop().await;
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod redis {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::Backend::Redis).await } )*
        }
        /// (xi): the embedded default passes (i)–(v).
        mod embedded {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::Backend::Memory).await } )*
        }
    };
}

both!(
    three_instances_run_and_three_bots_connect,
    shrinking_terminates_bots_after_their_task_and_deletes_everything,
    an_instance_past_its_lifetime_is_replaced_under_a_new_hostname,
    an_instance_whose_bot_never_connects_is_destroyed_after_the_timeout,
    removing_a_config_file_removes_everything_of_that_config,
);
