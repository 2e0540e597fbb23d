//! Terminal output that never panics: a closed pipe (`gce-backend … | head`) ends the output
//! quietly instead of killing the process mid-run.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Prints `text` and a newline on standard output; after a broken pipe, prints nothing more.
/// Returns false once the output is closed.
pub fn line(text: &str) -> bool {
    if CLOSED.load(Ordering::Relaxed) {
        return false;
    }
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
        CLOSED.store(true, Ordering::Relaxed);
        return false;
    }
    true
}

/// Prints `value` as pretty JSON.
pub fn json<T: serde::Serialize>(value: &T) -> bool {
    match serde_json::to_string_pretty(value) {
        Ok(s) => line(&s),
        Err(e) => line(&format!("{{\"error\": \"{e}\"}}")),
    }
}
