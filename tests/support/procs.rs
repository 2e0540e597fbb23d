//! `gce-backend run` as processes: a private Redis, the simulator and a settings file with
//! every cron job each second, shared by the processes a test starts, and a context to read what
//! they did.

use std::path::PathBuf;

use gce_backend::server::{self, Role, RunOptions};
use gce_backend::sim::{self, Sim};
use gce_backend_jobs::Ctx;
use gce_backend_queues::testing::RedisServer;

use super::bin::{gce_backend, terminate};
use super::fixtures::{DEPLOYMENT, settings, sim_config};
use super::host::temp_dir;

/// A private Redis, the simulator, and a directory with `pools/` and a settings file whose cron
/// jobs run every second: for tests that run `gce-backend run` processes on one Redis.
pub(crate) struct Procs {
    pub(crate) redis: RedisServer,
    pub(crate) sim: Sim,
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) dir: PathBuf,
    pub(crate) configs: PathBuf,
    pub(crate) settings: PathBuf,
}

impl Procs {
    /// Starts them; `toml` is added to the settings (after `[cron]`: start it with a table).
    pub(crate) async fn start(concurrency: usize, toml: &str) -> Procs {
        Self::start_with(concurrency, toml, sim_config()).await
    }

    /// [`Procs::start`] with the simulator configured as `sim`.
    pub(crate) async fn start_with(
        concurrency: usize,
        toml: &str,
        sim: gce_backend::sim::SimConfig,
    ) -> Procs {
        gce_backend::adapters::install_crypto();
        let redis = RedisServer::start();
        let (addr, sim) = sim::spawn(sim).await.unwrap();
        let dir = temp_dir();
        let configs = dir.join("pools");
        std::fs::create_dir_all(&configs).unwrap();
        let settings = dir.join("service.toml");
        let mut text = format!("deployment = \"{DEPLOYMENT}\"\nconcurrency = {concurrency}\n[cron]\n");
        for job in gce_backend_jobs::cron::names() {
            text.push_str(&format!("{job} = \"1s\"\n"));
        }
        text.push_str(toml);
        std::fs::write(&settings, text).unwrap();
        Procs { redis, sim, addr, dir, configs, settings }
    }

    /// `gce-backend run` on them (Redis, simulator, configs, settings), to add to.
    pub(crate) fn command(&self) -> std::process::Command {
        let mut c = gce_backend();
        c.args(["run", "--quiet", "--redis", &self.redis.url(), "--namespace", DEPLOYMENT])
            .args(["--gce-endpoint", &format!("http://{}", self.addr)])
            .arg("--configs")
            .arg(&self.configs)
            .arg("--settings")
            .arg(&self.settings);
        c
    }

    /// A `gce-backend run` process on them (output dropped).
    pub(crate) fn spawn(&self) -> std::process::Child {
        self.command()
            .args(["--listen", "127.0.0.1:0", "--root-url", "http://localhost"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    /// A context on the same Redis and simulator (no workers), to read what the processes did.
    pub(crate) async fn ctx(&self) -> Ctx {
        let opts = RunOptions {
            store: gce_backend::server::RedisArgs {
                redis: Some(self.redis.url()),
                namespace: DEPLOYMENT.into(),
            },
            role: Role::Workers,
            configs: self.configs.clone(),
            settings: self.settings.clone(),
            gce_endpoint: Some(format!("http://{}", self.addr)),
            swarming_endpoint: None,
            real_gce: false,
            google_credentials: None,
            certs_url: None,
            quiet: true,
            api: Default::default(),
        };
        server::context(&opts, &settings()).await.unwrap().0
    }

    /// Stops `procs` with SIGTERM (each must exit cleanly) and removes the directory.
    pub(crate) fn stop(self, procs: &mut [std::process::Child]) {
        for p in procs {
            terminate(p.id());
            assert!(p.wait().unwrap().success(), "graceful exit");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
