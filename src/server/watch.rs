//! Files watched (inotify, through the `notify` crate): the configs directory and its folders, by
//! processes that run the cron (a file written, renamed or removed, a Config file or one its
//! metadata reads from a folder, runs `import_configs` within a moment instead of at its next
//! tick, which stays as the safety net and covers a watch that cannot be set up), and the API's
//! tokens file (read again when it changes, and on SIGHUP).

use std::path::{Path, PathBuf};
use std::time::Duration;

use gce_backend_jobs::Ctx;
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::api::auth::{Changes, LiveTokens};

/// How long the directory must stay quiet before the import runs (an editor's save is several
/// events; a `cp` of many files too).
const QUIET: Duration = Duration::from_millis(100);

/// Whether `event` may change what the directory holds (reads and metadata do not).
fn changes(event: &notify::Event) -> bool {
    matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any)
}

/// Watches `dir` and the folders under it until `stopped` turns true, running `import_configs`
/// after each burst of changes: a Config's `from_file` may name a file in a folder (its revision
/// hashes that file, so the import applies the change). A watch that cannot be set up is one WARN
/// line; the periodic import goes on.
pub fn spawn(
    ctx: Ctx,
    dir: PathBuf,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let fallback = "changes are imported at the next import_configs tick";
    let bursts = Bursts::new(&dir, RecursiveMode::Recursive, "the configs directory", fallback);
    tokio::spawn(async move {
        let Some(mut bursts) = bursts else { return };
        loop {
            tokio::select! {
                got = bursts.next() => if got.is_none() { return },
                _ = stopped.wait_for(|s| *s) => return,
            }
            match gce_backend_jobs::cron::run(&ctx, "import_configs").await {
                Ok(n) => tracing::debug!(added = n, "configs directory changed: imported"),
                Err(e) => {
                    tracing::warn!(error = %e, "configs directory changed, but the import failed; the cron will retry")
                }
            }
        }
    })
}

/// The changes in one directory, as bursts: the watcher and the events it sends.
struct Bursts {
    _watcher: notify::RecommendedWatcher,
    rx: mpsc::UnboundedReceiver<()>,
}

impl Bursts {
    /// Watches `dir` (and the folders under it, `Recursive`; `what` names it in logs); `None`,
    /// with a WARN saying `fallback`, if the platform refuses. Symbolic links are not followed
    /// into folders (one could lead out of `dir`, to a whole file system); the folders they point
    /// to under `dir` are watched as folders.
    fn new(dir: &Path, mode: RecursiveMode, what: &'static str, fallback: &str) -> Option<Self> {
        let (tx, rx) = mpsc::unbounded_channel::<()>();
        let handler = move |event: notify::Result<notify::Event>| match event {
            Ok(e) if changes(&e) => {
                let _ = tx.send(());
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "watch of {what}"),
        };
        let config = notify::Config::default().with_follow_symlinks(false);
        let made = notify::RecommendedWatcher::new(handler, config).and_then(|mut w| {
            w.watch(dir, mode)?;
            Ok(w)
        });
        match made {
            Ok(w) => Some(Bursts { _watcher: w, rx }),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot watch {what}: {fallback}");
                None
            }
        }
    }

    /// Waits for the next burst of changes to end (no event for [`QUIET`]); `None` once the
    /// watch has ended.
    async fn next(&mut self) -> Option<()> {
        self.rx.recv().await?;
        while let Ok(Some(())) = tokio::time::timeout(QUIET, self.rx.recv()).await {}
        Some(())
    }
}

/// Keeps `tokens` as the tokens file at `path` says until `stopped` turns true: read again
/// after each change in its directory (when its content changed: the directory may hold other
/// files), on each SIGHUP, and once at the start (for a change made while the service started).
/// Each reload that changes a token, and each SIGHUP, is one INFO line naming the tokens added,
/// removed and changed; a file that cannot be read or parsed is one ERROR line and the tokens in
/// force stay.
pub fn tokens(
    tokens: LiveTokens,
    path: PathBuf,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    // Set up before the task starts: from here on a SIGHUP reloads rather than ends the process.
    let mut hangup = signal(SignalKind::hangup())?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut bursts = Bursts::new(
        &dir,
        RecursiveMode::NonRecursive,
        "the tokens file's directory",
        "send SIGHUP to reload the tokens file",
    );
    Ok(tokio::spawn(async move {
        let (mut last, mut why) = (None, "start");
        loop {
            let now = std::fs::read(&path).ok();
            if why == "SIGHUP" || now != last {
                reload(&tokens, &path, why);
                last = now;
            }
            let changed = async {
                match &mut bursts {
                    Some(b) => b.next().await,
                    None => std::future::pending().await,
                }
            };
            why = tokio::select! {
                got = changed => match got {
                    Some(()) => "changed",
                    None => "the watch ended", // SIGHUP only from now on
                },
                _ = hangup.recv() => "SIGHUP",
                _ = stopped.wait_for(|s| *s) => return,
            };
            if why == "the watch ended" {
                bursts = None;
            }
        }
    }))
}

/// Reads the tokens file at `path` into `tokens` (`why`: what asked, for the log line): one INFO
/// line naming what changed (DEBUG when nothing did, unless on SIGHUP), or one ERROR line naming
/// the file and the problem (never a token or a hash), the tokens in force then staying.
fn reload(tokens: &LiveTokens, path: &Path, why: &str) {
    let file = path.display().to_string();
    let read = std::fs::read_to_string(path).map_err(|e| format!("{file}: {e}"));
    match read.and_then(|text| tokens.reload(&text, &file)) {
        Ok(c) if c == Changes::default() && why != "SIGHUP" => {
            tracing::debug!(file, why, "tokens file read again: no token changed");
        }
        Ok(c) => {
            let (added, removed, changed) = (&c.added, &c.removed, &c.changed);
            tracing::info!(file, why, ?added, ?removed, ?changed, "tokens reloaded");
        }
        Err(error) => {
            tracing::error!(file, why, %error, "tokens file not reloaded: the tokens in force stay");
        }
    }
}

#[cfg(test)]
mod tests;
