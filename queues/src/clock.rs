//! The one place this crate reads the wall clock: a [`Clock`] that a [`crate::Queue`] and the
//! [`crate::MemoryEngine`] are given ([`SystemClock`] unless a test gives them another).

use std::fmt::Debug;
use std::sync::Arc;

use chrono::{DateTime, Utc};

/// Where the time comes from.
pub trait Clock: Send + Sync + Debug {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;

    /// The current time in milliseconds since the Unix epoch (0 before it).
    fn now_ms(&self) -> u64 {
        u64::try_from(self.now().timestamp_millis()).unwrap_or(0)
    }
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // the clock
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The system's wall clock, shared.
pub(crate) fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

#[cfg(test)]
mod tests;
