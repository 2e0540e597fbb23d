//! A running service's lifecycle: what it started (tasks told to stop by one signal, the cron
//! scheduler), the signals that stop it (SIGINT, SIGTERM), and the orderly stop, bounded: no new
//! work started, in-flight tasks finished within the settings' `stop_grace` (20 s by default)
//! and the runs still going then handed back to their queue (at most 2 s more:
//! `workers::spawn`), listeners drained for at most 5 s (`listeners`), all at once. So a process
//! told to stop exits within `stop_grace` + 2 s (or 5 s, if more), below an orchestrator's grace
//! (Kubernetes `terminationGracePeriodSeconds`, 30 s by default) when `stop_grace` leaves room.

use gce_backend_jobs::Ctx;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use gce_backend_sim as sim;

/// What a running service stops: its tasks, all told by one signal, and the cron scheduler.
pub struct Life {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    scheduler: Option<tokio_cron_scheduler::JobScheduler>,
}

impl Default for Life {
    fn default() -> Self {
        Life { stop: watch::channel(false).0, tasks: Vec::new(), scheduler: None }
    }
}

impl Life {
    /// Turns true when the service stops.
    pub fn stopped(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// A task to wait for when stopping (it watches [`Life::stopped`]).
    pub fn keep(&mut self, task: JoinHandle<()>) {
        self.tasks.push(task);
    }

    /// The cron scheduler, shut down first when stopping.
    pub fn scheduler(&mut self, scheduler: tokio_cron_scheduler::JobScheduler) {
        self.scheduler = Some(scheduler);
    }

    /// Stops the scheduler, tells every task to stop, waits for them (each bounds its own stop).
    async fn stop(mut self) {
        if let Some(mut s) = self.scheduler.take() {
            let _ = s.shutdown().await;
        }
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// A running service.
pub struct App {
    /// Its context.
    pub ctx: Ctx,
    /// The simulator it started, if any.
    pub sim: Option<(std::net::SocketAddr, sim::Sim)>,
    /// Where the API listens and its root URL, if it serves one.
    pub api: Option<(std::net::SocketAddr, String)>,
    /// The admin token the embedded default made (no `--tokens`).
    pub demo_token: Option<String>,
    /// What stops with it.
    pub life: Life,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").field("sim", &self.sim.as_ref().map(|s| s.0)).finish()
    }
}

impl App {
    /// Stops the scheduler, stops fetching, lets in-flight tasks finish within the stop's grace
    /// and hands back those still running then.
    pub async fn stop(self) {
        self.life.stop().await;
    }
}

/// Listens for SIGINT and SIGTERM from the call on (so a signal sent as soon as the process says
/// it runs stops it in order rather than killing it); the future resolves on either.
pub fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut int) = (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?);
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
