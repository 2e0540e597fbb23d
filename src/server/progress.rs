//! What `gce-backend run` prints on the terminal: where the simulator, the API and the dashboard
//! are (and the embedded default's admin token), then one line per Config whenever its counts
//! change. Logs go to standard error; these lines to standard output.

use std::collections::HashMap;
use std::time::Duration;

use gce_backend_jobs::Ctx;

use super::lifecycle::App;
use crate::out;

/// Says where the service's parts are: the simulator, the API, its reference and dashboard, and
/// the embedded default's admin token with the two variables the CLI reads.
pub fn announce(app: &App) {
    if let Some((addr, _)) = &app.sim {
        out::line(&format!("simulator on http://{addr} (Compute REST, Swarming pRPC, /sim/state)"));
    }
    if let Some((addr, root)) = &app.api {
        out::line(&format!(
            "API on {root}/api/gce-backend/v1 (reference: {root}/references/manifest.json; dashboard: {root}/ui/; listening on {addr})"
        ));
    }
    if let (Some(token), Some((_, root))) = (&app.demo_token, &app.api) {
        out::line(&format!(
            "admin token for this run: export GCE_BACKEND_ROOT_URL={root} GCE_BACKEND_TOKEN={token}"
        ));
    }
}

/// Prints one line per Config whenever its counts change.
pub async fn progress(ctx: Ctx, mut stopped: tokio::sync::watch::Receiver<bool>) {
    let mut last: HashMap<String, String> = HashMap::new();
    loop {
        if let Ok(prefixes) = gce_backend_jobs::fleet::status::prefixes(&*ctx.ports.store).await {
            for p in prefixes {
                let Ok((c, _)) =
                    gce_backend_jobs::records::counts::tally(&*ctx.ports.store, &p, ctx.now()).await
                else {
                    continue;
                };
                let errors = ctx.ports.store.errors(&p).await.unwrap_or_default();
                let mut line = format!(
                    "{p}: configured={} created={} connected={}",
                    c.configured, c.created, c.connected
                );
                for (name, n) in [("draining", c.draining), ("dead", c.dead), ("unhealthy", c.unhealthy)] {
                    if n > 0 {
                        line.push_str(&format!(" {name}={n}"));
                    }
                }
                if let Some(e) = errors.first().filter(|e| e.resolved.is_none()) {
                    line.push_str(&format!(" last_error={} ({})", e.code, e.stage));
                }
                if last.get(&p) != Some(&line) {
                    out::line(&line);
                    last.insert(p, line);
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}
