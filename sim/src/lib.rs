//! `gce-backend sim`: one HTTP server that speaks Compute Engine v1 REST (`gce.rs`), Swarming v2
//! pRPC (`swarming.rs`) and an admin API under `/sim/` (`admin.rs`), over a simulated world
//! (`world/`, typed state only) with faults (`config.rs`). Each route file encodes its answers.
//!
//! Its HTTP server (`listener.rs`) is the one every listener of the service runs too.
//!
//! Every request first advances the world to the current time, then may be delayed or failed
//! by the faults in force (drawn from the seeded generator), then is answered and counted by
//! method and status.

pub mod admin;
pub mod agent;
pub mod config;
pub mod filter;
pub mod gce;
pub mod identity;
pub mod listener;
pub mod swarming;
pub mod world;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::response::Response;
use tokio::net::TcpListener;
use tokio::time::Instant;

use config::ErrorFault;
pub use config::{Faults, SimConfig};
use world::World;

/// How long a call to something broken to hang (a Swarming server, a silent Compute) waits
/// unanswered at most: beyond any client timeout.
pub(crate) const HANG: Duration = Duration::from_secs(600);

/// Shared handle to the simulated world.
#[derive(Debug, Clone)]
pub struct Sim {
    world: Arc<Mutex<World>>,
}

impl Sim {
    /// A simulator with `cfg`.
    pub fn new(cfg: SimConfig) -> Self {
        Self { world: Arc::new(Mutex::new(World::new(cfg, Instant::now()))) }
    }

    fn lock(&self) -> MutexGuard<'_, World> {
        // Each request's changes are applied under the lock without panicking paths in between,
        // so the world stays consistent even if a thread panicked elsewhere.
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the world advanced to now.
    pub fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let mut w = self.lock();
        w.advance(Instant::now());
        f(&mut w)
    }

    /// Applies the latency and error faults for `method`: returns the error to answer with, if
    /// the draw says this call fails.
    async fn enter(&self, method: &str) -> Option<ErrorFault> {
        // Compute silent (faults `compute_hang`): the call waits, unanswered, until it is lifted.
        let compute = method.starts_with("compute.");
        let started = Instant::now();
        while compute && self.with(|w| w.faults.compute_hang) && started.elapsed() < HANG {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (latency, fail) = self.with(|w| {
            let fail = w.faults.error_for(method).cloned().filter(|e| {
                let rate = e.rate;
                w.chance(rate)
            });
            (w.faults.latency_for(method), fail)
        });
        if latency > 0 {
            tokio::time::sleep(Duration::from_millis(latency)).await;
        }
        fail
    }

    /// Counts the answer to `method` and returns it.
    fn answer(&self, method: &str, resp: Response) -> Response {
        let status = resp.status().as_u16();
        self.lock().count(method, status);
        resp
    }
}

/// The simulator's routes.
pub fn router(sim: Sim) -> Router {
    Router::new()
        .merge(gce::routes())
        .merge(swarming::routes())
        .merge(admin::routes())
        .merge(identity::routes())
        .with_state(sim)
}

/// Serves `sim` on `listener` within `limits` until the process ends.
pub async fn serve(listener: TcpListener, sim: Sim, limits: crate::listener::Limits) {
    tokio::spawn(agent::registrar(sim.clone()));
    crate::listener::serve(listener, router(sim), limits, std::future::pending()).await
}

/// Starts a simulator on a free loopback port (tests, the embedded default); returns its address.
pub async fn spawn(cfg: SimConfig) -> std::io::Result<(SocketAddr, Sim)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let sim = Sim::new(cfg);
    let served = sim.clone();
    tokio::spawn(serve(listener, served, crate::listener::Limits::default()));
    Ok((addr, sim))
}

/// Refuses a listen address off this machine unless `allow_remote`.
pub fn check_listen(addr: SocketAddr, allow_remote: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || allow_remote {
        Ok(())
    } else {
        Err(format!(
            "--listen {addr}: not a loopback address; the simulator has no authentication, pass --allow-remote to serve it anyway"
        ))
    }
}
