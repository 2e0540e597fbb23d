//! Time as a port, so tests move it by hand instead of sleeping.

use std::sync::Mutex;

use chrono::{DateTime, Utc};

/// Tells the time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock: the one place the reconcile logic and the service read the wall time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    // The clock.
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told (tests).
#[derive(Debug)]
pub struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    /// A clock at `t`.
    pub fn at(t: DateTime<Utc>) -> Self {
        Self(Mutex::new(t))
    }

    /// Moves it forward.
    pub fn advance(&self, d: chrono::Duration) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) += d;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
