//! Log lines that a flood cannot multiply: of each reason (a registration refused, a request
//! throttled), the first is logged at once, the next ones are counted, and once a minute one
//! line per reason gives the count ("N more in the last minute"). A reason quiet for a whole
//! minute is forgotten, so its next one is logged at once again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::Level;

/// How often the counts are written.
pub const MINUTE: Duration = Duration::from_secs(60);

/// `tracing`'s macros take a constant level: this picks one (WARN, INFO, or DEBUG for any other).
macro_rules! at {
    ($level:expr, $($rest:tt)*) => {
        match $level {
            Level::WARN => tracing::warn!($($rest)*),
            Level::INFO => tracing::info!($($rest)*),
            _ => tracing::debug!($($rest)*),
        }
    };
}

/// One kind of line, summarised by reason.
#[derive(Debug)]
pub struct Summary {
    what: String,
    /// Per reason: its level and how many came since its last line.
    counts: Mutex<BTreeMap<&'static str, (Level, u64)>>,
}

impl Summary {
    /// Lines saying `what` (e.g. "registration refused"); inside a runtime, a task writes the
    /// minute's counts for as long as the summary is kept.
    pub fn new(what: impl Into<String>) -> Arc<Self> {
        let s = Arc::new(Summary { what: what.into(), counts: Mutex::new(BTreeMap::new()) });
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let kept = Arc::downgrade(&s);
            rt.spawn(async move {
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + MINUTE, MINUTE);
                loop {
                    tick.tick().await;
                    let Some(s) = kept.upgrade() else { return };
                    s.flush();
                }
            });
        }
        s
    }

    /// One event of `reason`, at `level`: logged now with `detail` if it is the first since the
    /// reason was quiet, else counted for the minute's line. True when logged now.
    pub fn note(&self, reason: &'static str, level: Level, detail: impl FnOnce() -> String) -> bool {
        let first = {
            let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            match counts.get_mut(reason) {
                Some((_, n)) => {
                    *n += 1;
                    false
                }
                None => {
                    counts.insert(reason, (level, 0));
                    true
                }
            }
        };
        if first {
            let what = &self.what;
            let detail = detail();
            at!(
                level,
                reason,
                "{what}: {reason}{detail} (more of this reason: one line a minute, with their count)"
            );
        }
        first
    }

    /// Ends a minute: one line per reason counted in it, with the count; reasons that were
    /// quiet are forgotten. Returns the counts written.
    pub fn flush(&self) -> Vec<(&'static str, u64)> {
        let mut lines = Vec::new();
        {
            let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            counts.retain(|reason, (level, n)| {
                if *n == 0 {
                    return false;
                }
                lines.push((*reason, *level, *n));
                *n = 0;
                true
            });
        }
        let what = &self.what;
        for (reason, level, n) in &lines {
            at!(*level, reason, count = n, "{what}: {reason}: {n} more in the last minute");
        }
        lines.into_iter().map(|(reason, _, n)| (reason, n)).collect()
    }
}

#[cfg(test)]
mod tests;
