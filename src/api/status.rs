//! `status`: what `gce-backend status` prints, over the API: every Config the caller may read
//! (or the prefixes asked) with counts, errors, backoff and state, the global pause, the Config
//! files not applied that it may read, and for admins also the prefixes with VMs but no Config
//! and the rate-limit buckets.

use axum::Extension;
use axum::extract::State;
use gce_backend_jobs::fleet::status::Report;
use serde::Deserialize;

use super::auth::{Caller, Role};
use super::error::ApiError;
use super::io::{Out, Params, ok};
use super::state::Api;

/// `status`'s query.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StatusQuery {
    /// Config prefixes, comma separated (default: every one the caller may read).
    prefixes: Option<String>,
    /// `true`: count from the VM records now instead of the last `count_vms` run.
    live: Option<bool>,
}

/// `status`.
pub(super) async fn status(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Params(q): Params<StatusQuery>,
) -> Out<Report> {
    let live = q.live.unwrap_or(false);
    let store = &*api.ctx.ports.store;
    let asked: Vec<String> =
        q.prefixes.iter().flat_map(|p| p.split(',')).filter(|p| !p.is_empty()).map(str::to_owned).collect();
    let admin = caller.role == Role::Admin;
    // The prefixes this caller may see: every one (with a Config or VMs) for admins, else
    // those of the Configs it may read, from one read of them all (a prefix with VMs but no
    // Config is readable by admins only).
    let visible: std::collections::BTreeSet<String> = if admin {
        gce_backend_jobs::fleet::status::prefixes(store).await?.into_iter().collect()
    } else {
        store
            .configs()
            .await?
            .into_iter()
            .filter(|rec| caller.may_read(&rec.value.config))
            .map(|rec| rec.value.config.prefix)
            .collect()
    };
    if let Some(p) = asked.iter().find(|p| !visible.contains(*p)) {
        return Err(ApiError::not_found(&format!("Config or VMs with prefix {p:?}")));
    }
    let only = if asked.is_empty() && !admin { visible.iter().cloned().collect() } else { asked };
    let grace = api.ctx.settings.timing.config_delete_grace.chrono();
    let (store, buckets, now) = (store, &*api.ctx.ports.buckets, api.ctx.now());
    // An empty `only` is every prefix to the report: for a caller who may read none, the
    // filter below leaves none.
    let mut report = gce_backend_jobs::fleet::status::report(
        store,
        buckets,
        &only,
        now,
        grace,
        live,
        &api.ctx.settings.trust,
    )
    .await?;
    report.configs.retain(|c| visible.contains(&c.prefix));
    report.files.retain(|f| caller.may_read_file(f));
    if !admin {
        report.rate_limits.clear();
    }
    ok(report)
}
