//! The configs directory watched (inotify, through the `notify` crate) by processes that run the
//! cron: a file written, renamed or removed runs `import_configs` within a moment, instead of at
//! its next tick (which stays as the safety net, and covers a watch that cannot be set up).

use std::path::{Path, PathBuf};
use std::time::Duration;

use gce_backend_jobs::Ctx;
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// How long the directory must stay quiet before the import runs (an editor's save is several
/// events; a `cp` of many files too).
const QUIET: Duration = Duration::from_millis(100);

/// Whether `event` may change what the directory holds (reads and metadata do not).
fn changes(event: &notify::Event) -> bool {
    matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any)
}

/// Watches `dir` until `stopped` turns true, running `import_configs` after each burst of
/// changes. A watch that cannot be set up is one WARN line; the periodic import goes on.
pub fn spawn(
    ctx: Ctx,
    dir: PathBuf,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let watcher = start(&dir, tx);
    tokio::spawn(async move {
        let Some(_watcher) = watcher else { return };
        loop {
            tokio::select! {
                got = rx.recv() => if got.is_none() { return },
                _ = stopped.wait_for(|s| *s) => return,
            }
            // The burst: wait until no event came for QUIET.
            while let Ok(Some(())) = tokio::time::timeout(QUIET, rx.recv()).await {}
            match gce_backend_jobs::cron::run(&ctx, "import_configs").await {
                Ok(n) => tracing::debug!(added = n, "configs directory changed: imported"),
                Err(e) => {
                    tracing::warn!(error = %e, "configs directory changed, but the import failed; the cron will retry")
                }
            }
        }
    })
}

/// The watcher of `dir`, sending one message per relevant event; `None` (with a WARN) if the
/// platform refuses.
fn start(dir: &Path, tx: mpsc::UnboundedSender<()>) -> Option<notify::RecommendedWatcher> {
    let handler = move |event: notify::Result<notify::Event>| match event {
        Ok(e) if changes(&e) => {
            let _ = tx.send(());
        }
        Ok(_) => {}
        Err(e) => tracing::debug!(error = %e, "configs directory watch"),
    };
    let made = notify::recommended_watcher(handler).and_then(|mut w| {
        w.watch(dir, RecursiveMode::NonRecursive)?;
        Ok(w)
    });
    match made {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the configs directory: changes are imported at the next import_configs tick");
            None
        }
    }
}
