//! [`Sim`], the shared handle every route holds: the world behind its lock, advanced to the
//! current time on each use (plus how far its clock was moved ahead); the rate quotas, the
//! latency and error faults applied on entering a call; the answer counted on leaving it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::response::Response;
use tokio::time::Instant;

use crate::config::{ErrorFault, SimConfig};
use crate::world::{ApiError, World};

/// How long a call to something broken to hang (a Swarming server, a silent Compute) waits
/// unanswered at most: beyond any client timeout.
pub(crate) const HANG: Duration = Duration::from_secs(600);

/// Why a call is refused on entering it.
#[derive(Debug, Clone)]
pub(crate) enum Refused {
    /// An injected error (faults `errors`).
    Fault(ErrorFault),
    /// Over a rate quota (403 `rateLimitExceeded`).
    Quota(ApiError),
}

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

    /// Runs `f` on the world advanced to now (the monotonic time, plus how far the clock was
    /// moved ahead).
    pub fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let mut w = self.lock();
        let now = Instant::now() + w.skew;
        w.advance(now);
        f(&mut w)
    }

    /// Applies the faults for `method` on entering it: waits while Compute is silent, refuses a
    /// call of `project` over its rate quota (Compute calls name their project), adds the
    /// latency, and draws the injected error.
    pub(crate) async fn enter(&self, method: &str, project: Option<&str>) -> Result<(), Refused> {
        // Compute silent (faults `compute_hang`): the call waits, unanswered, until it is lifted.
        if method.starts_with("compute.") && self.with(|w| w.faults.compute_hang) {
            let _held = Held::new(self);
            let started = Instant::now();
            while self.with(|w| w.faults.compute_hang) && started.elapsed() < HANG {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let (latency, fail) = self.with(|w| {
            if let Some(p) = project {
                w.admit(p, method).map_err(Refused::Quota)?;
            }
            let fail = w.faults.error_for(method).cloned().filter(|e| {
                let rate = e.rate;
                w.chance(rate)
            });
            Ok((w.faults.latency_for(method), fail))
        })?;
        if latency > 0 {
            tokio::time::sleep(Duration::from_millis(latency)).await;
        }
        fail.map_or(Ok(()), |f| Err(Refused::Fault(f)))
    }

    /// Counts the answer to `method` and returns it.
    pub(crate) fn answer(&self, method: &str, resp: Response) -> Response {
        let status = resp.status().as_u16();
        self.lock().count(method, status);
        resp
    }
}

/// A Compute call held silent, counted in [`World::held_silent`] until it is let go or its
/// client goes away (the call's future dropped).
struct Held<'a>(&'a Sim);

impl<'a> Held<'a> {
    fn new(sim: &'a Sim) -> Self {
        sim.with(|w| w.held_silent += 1);
        Self(sim)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.lock().held_silent -= 1;
    }
}
