//! Isolation of remote services that are slow or broken: every call to a Swarming server or a
//! Compute project goes through a [`Guard`] keyed by that server or project, which bounds the
//! calls in flight to it (a hanging server holds at most that many worker slots; further calls
//! fail fast), gives each call a timeout suited to its method, and opens a circuit breaker after
//! `trip_after` timeouts in a row. While open, calls to that key are not sent: they are held
//! back ([`Refused::Open`], with how long until the breaker lets a call try again), and so are
//! the calls in flight when it opened whose timeout is the outage itself. When the wait is over,
//! one call probes (half-open) while the others stay held; its answer closes the breaker, its
//! timeout opens it again for twice as long, up to a cap. Errors that come back quickly (5xx,
//! malformed answers) do not trip it: they hold no worker for long, and the queue retries them.
//! Logged once per change of state (the first opening at WARN, the rest at INFO), with a
//! summary of the calls held back while it stays open ([`crate::episodes`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::config::Secs;
use crate::{episodes::Ended, episodes::Episodes, episodes::Held};

/// Settings of the guards (settings `[isolation]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Isolation {
    /// Calls in flight at once to one Swarming server, per process.
    pub calls_per_server: usize,
    /// Calls in flight at once to one Compute project, per process.
    pub calls_per_project: usize,
    /// Timeouts in a row that open the breaker of a server or project.
    pub trip_after: u32,
    /// First time a breaker stays open; doubles each time it opens again, up to `open_cap`.
    pub open_base: Secs,
    /// Longest time a breaker stays open.
    pub open_cap: Secs,
    /// Timeout of a Swarming call (GetBot, a ListBots page, …).
    pub swarming_timeout: Secs,
    /// Timeout of a Compute call.
    pub compute_timeout: Secs,
}

impl Default for Isolation {
    fn default() -> Self {
        Self {
            calls_per_server: 8,
            calls_per_project: 32,
            trip_after: 3,
            open_base: Secs(10),
            open_cap: Secs(300),
            swarming_timeout: Secs(10),
            compute_timeout: Secs(30),
        }
    }
}

impl Isolation {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [self.swarming_timeout, self.compute_timeout, self.open_base];
        if self.calls_per_server == 0 || self.calls_per_project == 0 || self.trip_after == 0 {
            return Err(
                "isolation: calls_per_server, calls_per_project and trip_after must be positive".into()
            );
        }
        if positive.iter().any(|s| s.0 == 0) || self.open_cap < self.open_base {
            return Err(
                "isolation: timeouts and open_base must be positive, open_cap at least open_base".into()
            );
        }
        Ok(())
    }
}

/// Why a guarded call did not give the service's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Every slot of the key stayed busy for the whole timeout.
    Busy(usize),
    /// The breaker is open after `.1` timeouts in a row: calls paused for `.0` more.
    Open(Duration, u32),
    /// No answer within the timeout.
    Timeout(Duration),
}

impl Refused {
    /// How long until the breaker lets a call try again, when it is open: a task refused so is
    /// held back until then (not a failure, no attempt spent).
    pub fn wait(&self) -> Option<Duration> {
        match self {
            Refused::Open(left, _) => Some(*left),
            Refused::Busy(_) | Refused::Timeout(_) => None,
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Busy(n) => write!(f, "its {n} call slots stayed busy for the whole timeout"),
            Refused::Open(left, n) => {
                write!(f, "circuit open after {n} timeouts in a row; calls paused for {left:?}")
            }
            Refused::Timeout(d) => write!(f, "no answer within {d:?}"),
        }
    }
}

#[derive(Debug)]
struct State {
    slots: Arc<Semaphore>,
    outages: u32,
    opened: u32,
    open_until: Option<Instant>,
}

/// Limits, timeouts and breakers, one set per key.
#[derive(Debug)]
pub struct Guard {
    limit: usize,
    trip_after: u32,
    open_base: Duration,
    open_cap: Duration,
    states: Mutex<HashMap<String, State>>,
    held: Episodes,
}

impl Guard {
    /// A guard allowing `limit` calls in flight per key.
    pub fn new(limit: usize, iso: &Isolation) -> Self {
        Self {
            limit,
            trip_after: iso.trip_after,
            open_base: Duration::from_secs(iso.open_base.0),
            open_cap: Duration::from_secs(iso.open_cap.0),
            states: Mutex::default(),
            held: Episodes::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, State>> {
        self.states.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `call` for `key` within `timeout`, after waiting (at most `timeout` too) for one of
    /// the key's slots. `Err(Err(refused))` when the guard did not let it answer.
    pub async fn call<T, E>(
        &self,
        key: &str,
        timeout: Duration,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Result<E, Refused>> {
        let (slots, probe) = {
            let mut states = self.lock();
            let s = states.entry(key.to_owned()).or_insert_with(|| State {
                slots: Arc::new(Semaphore::new(self.limit)),
                outages: 0,
                opened: 0,
                open_until: None,
            });
            let now = Instant::now();
            match s.open_until {
                Some(until) if until > now => {
                    let open = Refused::Open(until - now, s.outages);
                    drop(states);
                    return Err(Err(self.hold(key, open, now)));
                }
                Some(_) => {
                    // Half-open: this call probes; the others wait for its answer (at most its
                    // slot wait and its timeout; a probe that never settles leaves it to another).
                    s.open_until = Some(now + timeout * 2);
                    tracing::info!(remote = key, "circuit half-open: one call probes");
                    (s.slots.clone(), true)
                }
                None => (s.slots.clone(), false),
            }
        };
        // Held until the call ends, however it ends.
        let slot = tokio::time::timeout(timeout, slots.acquire_owned()).await;
        // The breaker opened while it waited (or the probe found no slot): not sent.
        if (!probe || slot.is_err())
            && let Some(open) = self.open_now(key)
        {
            return Err(Err(self.hold(key, open, Instant::now())));
        }
        let _slot = match slot {
            Ok(Ok(permit)) => permit,
            _ => return Err(Err(Refused::Busy(self.limit))),
        };
        let result = tokio::time::timeout(timeout, call).await;
        let held = self.settle(key, result.is_err(), probe);
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Ok(e)),
            // The outage itself (the breaker is open): held back like the calls not sent.
            Err(_) if let Some(open) = held => Err(Err(self.hold(key, open, Instant::now()))),
            Err(_) => Err(Err(Refused::Timeout(timeout))),
        }
    }

    /// The refusal of the open breaker of `key`, while it is open.
    fn open_now(&self, key: &str) -> Option<Refused> {
        let now = Instant::now();
        let states = self.lock();
        let s = states.get(key)?;
        s.open_until.filter(|u| *u > now).map(|u| Refused::Open(u - now, s.outages))
    }

    /// A call held back by the open breaker of `key`: counted, and summed up in the log every
    /// minute while it stays open (one line, whatever the number of calls).
    fn hold(&self, key: &str, open: Refused, now: Instant) -> Refused {
        if let Held::Summary { held, over } = self.held.held(key, now) {
            tracing::info!(remote = key, held, over = ?over, left = ?open.wait().unwrap_or_default(), "circuit still open: {held} calls held back");
        }
        open
    }

    /// Counts a timeout (opening the breaker at `trip_after` in a row) or an answer (closing it).
    /// Each change of state is logged once: the first opening at WARN, a later one (the probe, or
    /// a call in flight since before, got no answer) and the closing at INFO. Returns how long
    /// the breaker stays open when this call's timeout is the outage itself: the breaker opened
    /// before it ended (and no answer closed it since); the timeouts that open it are failures.
    fn settle(&self, key: &str, outage: bool, probe: bool) -> Option<Refused> {
        let mut states = self.lock();
        let s = states.get_mut(key)?;
        let now = Instant::now();
        if !outage {
            if s.opened > 0 {
                let ended = self.held.end(key, now).unwrap_or(Ended { held: 0, lasted: Duration::ZERO });
                tracing::info!(remote = key, held = ended.held, lasted = ?ended.lasted, "circuit closed: calls go through again");
            }
            s.outages = 0;
            s.opened = 0;
            s.open_until = None;
            return None;
        }
        let open_now =
            |s: &State| s.open_until.filter(|u| *u > now).map(|u| Refused::Open(u - now, s.outages));
        if s.opened > 0
            && !probe
            && let Some(open) = open_now(s)
        {
            return Some(open);
        }
        s.outages += 1;
        if s.opened == 0 && s.outages < self.trip_after {
            return None;
        }
        let open = self.open_base.saturating_mul(1 << s.opened.min(16)).min(self.open_cap);
        s.open_until = Some(now + open);
        s.opened += 1;
        if s.opened > 1 {
            tracing::info!(remote = key, open_for = ?open, times = s.opened, "circuit still without an answer: open again");
            return open_now(s);
        }
        self.held.begin(key, now);
        tracing::warn!(remote = key, outages = s.outages, open_for = ?open, "circuit open: calls held back");
        None
    }

    /// Whether the breaker of `key` is open now, and for how long still.
    #[cfg(test)]
    fn open_for(&self, key: &str) -> Option<Duration> {
        let now = Instant::now();
        self.lock().get(key).and_then(|s| s.open_until).filter(|u| *u > now).map(|u| u - now)
    }
}

#[cfg(test)]
mod tests;
