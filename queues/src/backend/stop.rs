//! What a bounded stop of a process's workers leaves behind, handed back. Told to stop, apalis's
//! workers take nothing more and their in-flight tasks get a grace to finish (the monitor's
//! `shutdown_timeout`); when it runs out, the workers are dropped, their handlers with them. Every
//! task they still hold is then handed back to its queue at once ([`Holdings::hand_back`]): a
//! started run cut short as [`Resolution::HandBack`], a task taken but not started as
//! [`Resolution::Release`]. Neither is ever acknowledged as done, and neither waits for its lease
//! to run out before another worker may take it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::join_all;
use tracing::{info, warn};

use super::ack::Acker;
use super::lease::{Held, held_lock};
use crate::engine::{Ack, Resolution};
use crate::queue::Queue;

/// Longest a stop waits for the hand-back to be written once the grace has run out. What is
/// not written by then (the engine does not answer) stays leased to the stopped worker until its
/// lease runs out, and is then delivered again: late, never lost.
pub const HAND_BACK_LIMIT: Duration = Duration::from_secs(2);

/// The tasks held by the workers of a process, across their backends (each backend made with
/// [`super::QueueBackend::held_in`] joins it): what a stop that runs out of time hands back.
/// Cheap to clone.
#[derive(Clone, Default)]
pub struct Holdings {
    holders: Arc<Mutex<Vec<Holder>>>,
}

/// One backend's held tasks, and the flusher that writes its acks.
#[derive(Clone)]
struct Holder {
    queue: Queue,
    held: Held,
    acker: Acker,
}

impl std::fmt::Debug for Holdings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holdings").field("backends", &lock(&self.holders).len()).finish()
    }
}

/// What a hand-back did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandedBack {
    /// Started runs cut short, handed back ([`Resolution::HandBack`]).
    pub handed_back: usize,
    /// Tasks taken but not started, released ([`Resolution::Release`]).
    pub released: usize,
    /// Every write took effect within the limit (false: the engine did not answer in time, or a
    /// lease was already lost; those tasks come back when their lease runs out).
    pub written: bool,
}

fn lock(m: &Mutex<Vec<Holder>>) -> MutexGuard<'_, Vec<Holder>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Holdings {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Follows a backend's held tasks, written back through `acker`.
    pub(super) fn add(&self, queue: &Queue, held: &Held, acker: Acker) {
        let mut holders = lock(&self.holders);
        // A backend only this follows is gone (its worker ended with an error and is being
        // restarted, its handlers dropped): what it still held goes back now, not after its lease
        // (which this reference would otherwise keep renewing), and it is followed no more.
        let (gone, kept): (Vec<Holder>, Vec<Holder>) =
            std::mem::take(&mut *holders).into_iter().partition(|h| Arc::strong_count(&h.held) == 1);
        *holders = kept;
        holders.push(Holder { queue: queue.clone(), held: held.clone(), acker });
        let gone: Vec<Holder> = gone.into_iter().filter(|h| !held_lock(&h.held).is_empty()).collect();
        if !gone.is_empty()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(hand_back(gone, HAND_BACK_LIMIT));
        }
    }

    /// Tasks held now, started or not, across the backends.
    pub fn held(&self) -> usize {
        lock(&self.holders).iter().map(|h| held_lock(&h.held).len()).sum()
    }

    /// Hands back every task held whose run has not ended: a started one as
    /// [`Resolution::HandBack`], one not started as [`Resolution::Release`]; a run that ended has
    /// its own ack on the way, which is waited for instead. Waits at most `limit` for the writes.
    ///
    /// Only for workers that are gone: a handler still running would have its own ack refused
    /// (its lease was handed back) after doing its work a second time.
    pub async fn hand_back(&self, limit: Duration) -> HandedBack {
        let holders = lock(&self.holders).clone();
        hand_back(holders, limit).await
    }
}

/// [`Holdings::hand_back`] of `holders`.
async fn hand_back(holders: Vec<Holder>, limit: Duration) -> HandedBack {
    let mut out = HandedBack { written: true, ..HandedBack::default() };
    let mut writes = Vec::new();
    for Holder { queue, held, acker } in holders {
        let acks: Vec<Ack> = {
            let mut held = held_lock(&held);
            let ids: Vec<String> = held.iter().filter(|(_, h)| !h.acking).map(|(id, _)| id.clone()).collect();
            ids.into_iter()
                .filter_map(|id| held.remove(&id).map(|h| (id, h)))
                .map(|(id, h)| {
                    let resolution = if h.started { Resolution::HandBack } else { Resolution::Release };
                    Ack { id, token: h.token, resolution }
                })
                .collect()
        };
        let cut: Vec<&str> =
            acks.iter().filter(|a| a.resolution == Resolution::HandBack).map(|a| a.id.as_str()).collect();
        let name = &queue.spec().name;
        if !cut.is_empty() {
            warn!(queue = %name, tasks = ?cut, "runs cut short by the stop: handed back to the queue");
        }
        let released = acks.len() - cut.len();
        if released > 0 {
            info!(queue = %name, released, "tasks not started: released to the queue");
        }
        out.handed_back += cut.len();
        out.released += released;
        writes.extend(
            acks.into_iter().map(|a| Box::pin(acker.ack(a)) as futures::future::BoxFuture<'static, bool>),
        );
        // Acks of runs that ended before the stop were sent earlier: written by then too.
        writes.push(Box::pin(acker.flushed()));
    }
    match tokio::time::timeout(limit, join_all(writes)).await {
        Ok(w) => out.written = w.into_iter().all(|ok| ok),
        Err(_) => {
            warn!(
                ?limit,
                "the hand-back was not written in time: those tasks come back when their lease runs out"
            );
            out.written = false;
        }
    }
    out
}
