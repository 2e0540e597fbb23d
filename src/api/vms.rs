//! VM methods: a Config's VMs (paged, by state), one VM with its tasks, recycle.

use axum::Extension;
use axum::extract::{Path, State};
use gce_backend_jobs::config::Config;
use gce_backend_jobs::model::{ConfigRecord, VmState, VmView};
use gce_backend_jobs::naming;
use gce_backend_jobs::operate;

use super::auth::Caller;
use super::configs::readable;
use super::error::ApiError;
use super::io::{Out, Params, ok};
use super::state::Api;
use super::types::{Page, VmDetail, VmList};

/// `listVms`.
pub(super) async fn list(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
    Params(page): Params<Page>,
) -> Out<VmList> {
    let rec = readable(&api, &caller, &prefix).await?.value;
    let state = match page.state.as_deref() {
        None | Some("") => None,
        Some(s) => Some(s.parse::<VmState>().map_err(ApiError::invalid)?),
    };
    let limit = page.limit()?;
    let (vms, continuation_token) = operate::list_vms(
        &api.ctx,
        &prefix,
        Some(&rec.config),
        state,
        page.continuation_token.as_deref(),
        limit,
    )
    .await?;
    let let_go = rec.let_go.iter().map(|i| naming::vm_id(&prefix, *i)).collect();
    ok(VmList { vms, let_go, continuation_token })
}

/// The Config of VM `id` if the caller may read it (404 alike otherwise).
async fn visible(api: &Api, caller: &Caller, id: &str) -> Result<ConfigRecord, ApiError> {
    let hidden = || ApiError::not_found(&format!("VM {id:?}"));
    let (prefix, _) = naming::parse_id(id).ok_or_else(hidden)?;
    readable(api, caller, prefix).await.map(|r| r.value).map_err(|_| hidden())
}

/// The VM of Config `config` (as the caller read it) and its live tasks.
async fn detail(api: &Api, id: &str, config: &Config) -> Result<VmDetail, ApiError> {
    let (vm, tasks) = operate::vm(&api.ctx, id, Some(config)).await?;
    let instance_status = match &vm.vm.instance {
        None => None,
        Some(_) => {
            let v = &vm.vm;
            let asked = api.ctx.ports.compute.get(v.project(), v.zone(), &v.hostname);
            match tokio::time::timeout(std::time::Duration::from_secs(5), asked).await {
                Ok(Ok(Some(i))) => Some(i.status),
                Ok(Ok(None)) => Some("GONE".to_owned()),
                _ => None,
            }
        }
    };
    Ok(VmDetail { vm, instance_status, tasks })
}

/// `vm`.
pub(super) async fn get(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Out<VmDetail> {
    let rec = visible(&api, &caller, &id).await?;
    ok(detail(&api, &id, &rec.config).await?)
}

/// `recycleVm`.
pub(super) async fn recycle(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Out<VmDetail> {
    let rec = visible(&api, &caller, &id).await?;
    if !caller.may_write(&rec.config) {
        let msg = format!("token {:?} may not change Config {:?}'s VMs", caller.name, rec.config.prefix);
        return Err(ApiError::forbidden(msg));
    }
    let vm = operate::recycle(&api.ctx, &id, &caller.name).await?;
    match detail(&api, &id, &rec.config).await {
        // Dropped before it was sent to Compute: it is made anew.
        Err(e) if e.status() == axum::http::StatusCode::NOT_FOUND => {
            let vm = VmView::of(vm, None);
            ok(VmDetail { vm, instance_status: None, tasks: Vec::new() })
        }
        other => ok(other?),
    }
}
