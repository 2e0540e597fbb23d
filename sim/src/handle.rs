//! [`Sim`], the shared handle every route holds: the world behind its lock, advanced to the
//! current time on each use; the latency and error faults applied on entering a call; the
//! answer counted on leaving it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::response::Response;
use tokio::time::Instant;

use crate::config::{ErrorFault, SimConfig};
use crate::world::World;

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
    pub(crate) async fn enter(&self, method: &str) -> Option<ErrorFault> {
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
    pub(crate) fn answer(&self, method: &str, resp: Response) -> Response {
        let status = resp.status().as_u16();
        self.lock().count(method, status);
        resp
    }
}
