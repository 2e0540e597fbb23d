//! Isolation of remote services that are slow or broken: every call to a Swarming server or a
//! Compute project goes through a [`Guard`] keyed by that server or project, which bounds the
//! calls in flight to it (a hanging server holds at most that many worker slots; further calls
//! fail fast), gives each call a timeout suited to its method, and opens a circuit breaker after
//! `trip_after` timeouts in a row: while open, calls to that key fail at once, and it is tried
//! again after a backoff that doubles up to a cap. Errors that come back quickly (5xx, malformed
//! answers) do not trip it: they hold no worker for long, and the queue retries them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::config::Secs;

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
        let slots = {
            let mut states = self.lock();
            let s = states.entry(key.to_owned()).or_insert_with(|| State {
                slots: Arc::new(Semaphore::new(self.limit)),
                outages: 0,
                opened: 0,
                open_until: None,
            });
            let now = Instant::now();
            if let Some(until) = s.open_until.filter(|u| *u > now) {
                return Err(Err(Refused::Open(until - now, s.outages)));
            }
            s.slots.clone()
        };
        // Held until the call ends, however it ends.
        let _slot = match tokio::time::timeout(timeout, slots.acquire_owned()).await {
            Ok(Ok(permit)) => permit,
            _ => return Err(Err(Refused::Busy(self.limit))),
        };
        let result = tokio::time::timeout(timeout, call).await;
        self.settle(key, result.is_err());
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Ok(e)),
            Err(_) => Err(Err(Refused::Timeout(timeout))),
        }
    }

    /// Counts a timeout (opening the breaker at `trip_after` in a row) or an answer (closing it).
    /// Each change of state is logged once: the calls that were in flight when it opened time
    /// out too, but neither count again nor reopen it.
    fn settle(&self, key: &str, outage: bool) {
        let mut states = self.lock();
        let Some(s) = states.get_mut(key) else { return };
        let now = Instant::now();
        if !outage {
            if s.opened > 0 {
                tracing::info!(remote = key, "circuit closed: calls go through again");
            }
            s.outages = 0;
            s.opened = 0;
            s.open_until = None;
            return;
        }
        if s.open_until.is_some_and(|u| u > now) {
            return;
        }
        s.outages += 1;
        if s.outages >= self.trip_after {
            let open = self.open_base.saturating_mul(1 << s.opened.min(16)).min(self.open_cap);
            s.open_until = Some(now + open);
            s.opened += 1;
            tracing::warn!(remote = key, outages = s.outages, open_for = ?open, times = s.opened, "circuit open: calls paused");
        }
    }

    /// Whether the breaker of `key` is open now, and for how long still.
    #[cfg(test)]
    fn open_for(&self, key: &str) -> Option<Duration> {
        let now = Instant::now();
        self.lock().get(key).and_then(|s| s.open_until).filter(|u| *u > now).map(|u| u - now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(limit: usize) -> Guard {
        Guard::new(
            limit,
            &Isolation { trip_after: 2, open_base: Secs(10), open_cap: Secs(40), ..Isolation::default() },
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_key_holds_at_most_its_limit_and_others_go_on() {
        let g = std::sync::Arc::new(guard(2));
        let hang = || std::future::pending::<Result<(), ()>>();
        let (a, b) = (g.clone(), g.clone());
        let t1 = tokio::spawn(async move { a.call("hang", Duration::from_secs(10), hang()).await });
        let t2 = tokio::spawn(async move { b.call("hang", Duration::from_secs(10), hang()).await });
        tokio::task::yield_now().await;
        // A third call waits for a slot (at most its timeout) instead of reaching the server.
        let third = g.call("hang", Duration::from_secs(1), hang()).await;
        assert_eq!(third, Err(Err(Refused::Busy(2))), "no third call reaches the hanging server");
        let other = g.call("good", Duration::from_secs(10), async { Ok::<_, ()>(7) }).await;
        assert_eq!(other, Ok(7));
        assert_eq!(t1.await.unwrap(), Err(Err(Refused::Timeout(Duration::from_secs(10)))));
        assert!(matches!(t2.await.unwrap(), Err(Err(Refused::Timeout(_)))));
        // Two timeouts in a row: open, so calls fail at once without reaching the server.
        assert!(g.open_for("hang").is_some());
        let r = g.call("hang", Duration::from_secs(10), async { Ok::<_, ()>(1) }).await;
        assert!(matches!(r, Err(Err(Refused::Open(_, 2)))), "{r:?}");
        // After the backoff a call goes through again; a success closes the breaker.
        tokio::time::advance(Duration::from_secs(11)).await;
        let r = g.call("hang", Duration::from_secs(10), async { Ok::<_, ()>(1) }).await;
        assert_eq!(r, Ok(1));
        assert!(g.open_for("hang").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn the_calls_in_flight_when_it_opens_open_it_once() {
        let g = std::sync::Arc::new(guard(10));
        let calls: Vec<_> = (0..10)
            .map(|_| {
                let g = g.clone();
                tokio::spawn(async move {
                    g.call("hang", Duration::from_secs(1), std::future::pending::<Result<(), ()>>()).await
                })
            })
            .collect();
        for c in calls {
            assert!(matches!(c.await.unwrap(), Err(Err(Refused::Timeout(_)))));
        }
        let counts = g.lock().get("hang").map(|s| (s.opened, s.outages));
        assert_eq!(counts, Some((1, 2)), "opened once, by the first two");
        let open = g.open_for("hang").unwrap();
        assert_eq!(open, Duration::from_secs(10), "the first opening's wait, not doubled by the others");
        let r = g.call("hang", Duration::from_secs(1), async { Ok::<_, ()>(1) }).await;
        assert_eq!(r.unwrap_err().unwrap_err().wait(), Some(open), "a refused call says how long to wait");
    }

    #[tokio::test(start_paused = true)]
    async fn quick_errors_do_not_trip_and_the_backoff_doubles() {
        let g = guard(4);
        for _ in 0..5 {
            let r = g.call("s", Duration::from_secs(1), async { Err::<(), _>("503") }).await;
            assert_eq!(r, Err(Ok("503")));
        }
        assert!(g.open_for("s").is_none(), "answers, even errors, keep it closed");
        let hang = || std::future::pending::<Result<(), &str>>();
        for _ in 0..2 {
            let _ = g.call("s", Duration::from_secs(1), hang()).await;
        }
        let first = g.open_for("s").unwrap();
        tokio::time::advance(first + Duration::from_millis(1)).await;
        let _ = g.call("s", Duration::from_secs(1), hang()).await;
        let second = g.open_for("s").unwrap();
        assert!(second > first, "{first:?} then {second:?}");
    }
}
