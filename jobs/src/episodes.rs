//! Episodes of a condition that holds work back (an open circuit, a backed-off zone, a used-up
//! rate limit, a Swarming server that cannot be walked), from its start to its end, per process:
//! the one rule by which such a condition is logged once per change of state, with a summary of
//! the work it held back every [`SUMMARY_EVERY`] while it lasts, never once per task.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How often a condition that lasts is summed up in the log.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
struct Episode {
    since: Instant,
    said: Instant,
    held: u64,
    held_since_said: u64,
}

/// What the caller logs after a task was held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The condition was not on: it starts now (its one line of start).
    Began,
    /// A summary is due: `held` tasks were held back over the last `over`.
    Summary {
        /// Tasks held back since the last line.
        held: u64,
        /// Since the last line.
        over: Duration,
    },
    /// Nothing to say but at DEBUG.
    Quiet,
}

/// An episode that ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Tasks it held back in all.
    pub held: u64,
    /// How long it lasted.
    pub lasted: Duration,
}

/// The episodes on in this process, by key (`circuit <project>`, `zone <project>/<zone>`, …).
#[derive(Debug, Default)]
pub struct Episodes(Mutex<HashMap<String, Episode>>);

impl Episodes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Episode>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The condition `key` starts (when not on yet; true then), without holding a task back.
    pub fn begin(&self, key: &str, now: Instant) -> bool {
        let mut m = self.lock();
        if m.contains_key(key) {
            return false;
        }
        m.insert(key.to_owned(), Episode { since: now, said: now, held: 0, held_since_said: 0 });
        true
    }

    /// A task was held back by condition `key` at `now`.
    pub fn held(&self, key: &str, now: Instant) -> Held {
        let mut m = self.lock();
        let Some(e) = m.get_mut(key) else {
            m.insert(key.to_owned(), Episode { since: now, said: now, held: 1, held_since_said: 0 });
            return Held::Began;
        };
        e.held += 1;
        e.held_since_said += 1;
        let over = now.saturating_duration_since(e.said);
        if over < SUMMARY_EVERY {
            return Held::Quiet;
        }
        let held = std::mem::take(&mut e.held_since_said);
        e.said = now;
        Held::Summary { held, over }
    }

    /// Condition `key` is over: what its episode held back, if one was on.
    pub fn end(&self, key: &str, now: Instant) -> Option<Ended> {
        let e = self.lock().remove(key)?;
        Some(Ended { held: e.held, lasted: now.saturating_duration_since(e.since) })
    }
}

#[cfg(test)]
mod tests;
