//! `spend`: the showback report (`gce-backend spend`, the dashboard's costs), as
//! `jobs::spend::report` makes it, cut to what the caller may read: the Configs it may read (a
//! deleted one: an admin, or a member of its tenant's group), the tenants that list one or whose
//! group it is in. An admin sees everything.

use axum::Extension;
use axum::extract::State;
use gce_backend_jobs::config::trust::OPEN_TENANT;
use gce_backend_jobs::{spend::report, spend::report::SpendReport};
use serde::Deserialize;

use super::auth::{Caller, Role};
use super::error::ApiError;
use super::io::{Out, Params, ok};
use super::state::Api;

/// `spend`'s query.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SpendQuery {
    /// One tenant (default: every one the caller may read).
    tenant: Option<String>,
    /// The month, `YYYY-MM` (default: this month, UTC).
    month: Option<String>,
}

/// Whether `caller` may read tenant `name`'s entry without reading one of its Configs: an admin,
/// or a member of the tenant's group (the open tenant has none).
fn in_tenant(caller: &Caller, name: &str) -> bool {
    caller.role == Role::Admin || (name != OPEN_TENANT && caller.may_read_owned(&[name.to_owned()]))
}

/// `spend`.
pub(super) async fn spend(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Params(q): Params<SpendQuery>,
) -> Out<SpendReport> {
    let (store, trust, now) = (&*api.ctx.ports.store, &*api.ctx.settings.trust, api.ctx.now());
    let asked = report::asked(trust, now, q.month.as_deref(), q.tenant.as_deref())
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let mut r = report::of(store, trust, now, &asked).await?;
    if caller.role != Role::Admin {
        let readable: std::collections::BTreeSet<String> = store
            .configs()
            .await?
            .into_iter()
            .filter(|rec| caller.may_read(&rec.value.config))
            .map(|rec| rec.value.config.prefix)
            .collect();
        r.retain(
            |c| readable.contains(&c.prefix) || (c.deleted && in_tenant(&caller, &c.tenant)),
            |t| in_tenant(&caller, t),
        );
        // A tenant asked that the caller may not read reads as one that does not exist.
        if let Some(t) = asked.tenant.as_deref().filter(|_| r.tenants.is_empty()) {
            return Err(ApiError::invalid(report::Refused::Tenant(t.to_owned()).to_string()));
        }
    }
    ok(r)
}
