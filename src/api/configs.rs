//! Config methods: list, get, create, update, delete, amount, pause and resume (one Config or
//! all), plan, and the audit trail (a Config's, the global one). Reads answer 404 alike for a
//! missing Config and one the caller may not read; a Config whose file is not applied is a 404
//! that says why to those who may read that file's errors.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use gce_backend_jobs::config::Config;
use gce_backend_jobs::model::{AuditEntry, ConfigRecord, FileError, GLOBAL_AUDIT, Plan, PlanInput};
use gce_backend_jobs::operate;
use gce_backend_jobs::operate::Must;
use gce_backend_jobs::ports::store::{StoreError, Versioned};

use super::auth::{Caller, Role};
use super::error::ApiError;
use super::io::{Input, Out, Params, created, ok};
use super::state::Api;
use super::types::{AmountInput, AuditList, ConfigEntry, ConfigList, GlobalPause, Page, PauseInput};

/// The stored record of `prefix` if the caller may read it (404 alike otherwise).
pub(super) async fn readable(
    api: &Api,
    caller: &Caller,
    prefix: &str,
) -> Result<Versioned<ConfigRecord>, ApiError> {
    match api.ctx.ports.store.config(prefix).await {
        Ok(Some(rec)) if caller.may_read(&rec.value.config) => Ok(rec),
        Ok(_) => Err(ApiError::not_found(&format!("Config {prefix:?}"))),
        Err(StoreError::Corrupt { .. }) if caller.role == Role::Admin => {
            Err(ApiError::new(StatusCode::CONFLICT, format!("Config {prefix:?} is corrupt: see its status")))
        }
        Err(StoreError::Corrupt { .. }) => Err(ApiError::not_found(&format!("Config {prefix:?}"))),
        Err(e) => Err(e.into()),
    }
}

/// The record of `prefix` if the caller may change it: 404 when unreadable, 403 when readable
/// but not theirs.
async fn writable(api: &Api, caller: &Caller, prefix: &str) -> Result<Versioned<ConfigRecord>, ApiError> {
    let rec = readable(api, caller, prefix).await?;
    if !caller.may_write(&rec.value.config) {
        return Err(ApiError::forbidden(format!(
            "token {:?} may not change Config {prefix:?}: it needs the writer role and one of the Config's owner groups {:?}",
            caller.name, rec.value.config.owner
        )));
    }
    Ok(rec)
}

/// The Config files not applied and the deletions held, those `caller` may read.
async fn files(api: &Api, caller: &Caller) -> Result<Vec<FileError>, ApiError> {
    let mut all = api.ctx.ports.store.file_errors().await?;
    all.retain(|f| caller.may_read_file(f));
    Ok(all)
}

/// A Config with its status now (counts read from its VM records), whether `caller` may
/// change it, and what its file has that is not followed.
async fn entry(api: &Api, caller: &Caller, rec: ConfigRecord) -> Result<ConfigEntry, ApiError> {
    let files = files(api, caller).await?;
    entry_with(api, caller, rec, &files).await
}

/// [`entry`] with the files read already (`files`: those the caller may read).
async fn entry_with(
    api: &Api,
    caller: &Caller,
    rec: ConfigRecord,
    files: &[FileError],
) -> Result<ConfigEntry, ApiError> {
    let status = gce_backend_jobs::fleet::status::status(
        &*api.ctx.ports.store,
        &rec.config.prefix,
        api.ctx.now(),
        api.ctx.settings.timing.config_delete_grace.chrono(),
        // Counted from the VM records now, not the last count_vms (a minute old at worst).
        true,
    )
    .await?;
    let may_change = caller.may_write(&rec.config);
    let files = files.iter().filter(|f| f.prefix == rec.config.prefix).cloned().collect();
    Ok(ConfigEntry { amount: rec.current_amount, config: rec.config, status, may_change, files })
}

/// `listConfigs`.
pub(super) async fn list(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Params(page): Params<Page>,
) -> Out<ConfigList> {
    let limit = page.limit()?;
    let mut recs: Vec<ConfigRecord> = api
        .ctx
        .ports
        .store
        .configs()
        .await?
        .into_iter()
        .map(|r| r.value)
        .filter(|r| caller.may_read(&r.config))
        .filter(|r| page.continuation_token.as_ref().is_none_or(|after| r.config.prefix > *after))
        .collect();
    recs.sort_by(|a, b| a.config.prefix.cmp(&b.config.prefix));
    let more = recs.len() > limit;
    recs.truncate(limit);
    let continuation_token = more.then(|| recs.last().map(|r| r.config.prefix.clone())).flatten();
    let files = files(&api, &caller).await?;
    let mut configs = Vec::with_capacity(recs.len());
    for r in recs {
        configs.push(entry_with(&api, &caller, r, &files).await?);
    }
    ok(ConfigList { configs, files, continuation_token })
}

/// `config`.
pub(super) async fn get(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
) -> Out<ConfigEntry> {
    let rec = match readable(&api, &caller, &prefix).await {
        Ok(rec) => rec,
        Err(e) if e.status() == StatusCode::NOT_FOUND => {
            // No Config: if a file naming it is not applied, say why instead of a bare 404.
            let mut files = files(&api, &caller).await?;
            // (A file that could not be read as far as its prefix, by its name.)
            let named = |f: &FileError| {
                f.prefix.is_empty() && std::path::Path::new(&f.path).file_stem() == Some(prefix.as_ref())
            };
            files.retain(|f| f.prefix == prefix || named(f));
            return Err(match files.is_empty() {
                true => e,
                false => ApiError::not_applied(&prefix, files),
            });
        }
        Err(e) => return Err(e),
    };
    ok(entry(&api, &caller, rec.value).await?)
}

/// The body's prefix must be the path's (an empty one takes it).
fn named(mut config: Config, prefix: &str) -> Result<Config, ApiError> {
    if config.prefix.is_empty() {
        config.prefix = prefix.to_owned();
    }
    if config.prefix != prefix {
        return Err(ApiError::invalid(format!(
            "the body's prefix {:?} differs from the path's {prefix:?}",
            config.prefix
        )));
    }
    Ok(config)
}

/// A writer may only make or keep a Config one of its groups owns (else it could not manage it).
/// An invalid Config is answered first, with every broken rule.
fn owned(caller: &Caller, config: &Config) -> Result<(), ApiError> {
    let problems = config.problems();
    if !problems.is_empty() {
        return Err(super::error::invalid_config(problems));
    }
    if caller.may_write(config) {
        return Ok(());
    }
    Err(ApiError::forbidden(format!(
        "token {:?} (groups {:?}) must name one of its groups in the Config's owner",
        caller.name, caller.groups
    )))
}

/// `createConfig`.
pub(super) async fn create(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
    Input(config): Input<Config>,
) -> Out<ConfigEntry> {
    let config = named(config, &prefix)?;
    owned(&caller, &config)?;
    let (rec, _) = operate::apply_expecting(&api.ctx, config, &caller.name, Must::Absent).await?;
    created(entry(&api, &caller, rec).await?)
}

/// `updateConfig`.
pub(super) async fn update(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
    Input(config): Input<Config>,
) -> Out<ConfigEntry> {
    let config = named(config, &prefix)?;
    let read = writable(&api, &caller, &prefix).await?;
    owned(&caller, &config)?;
    let (rec, _) =
        operate::apply_expecting(&api.ctx, config, &caller.name, Must::Version(read.version)).await?;
    ok(entry(&api, &caller, rec).await?)
}

/// The one shape of a change to a Config the caller may change: check, act, answer the entry.
async fn change(
    api: &Api,
    caller: &Caller,
    prefix: &str,
    act: impl AsyncFnOnce(&gce_backend_jobs::Ctx) -> Result<ConfigRecord, operate::OpError>,
) -> Out<ConfigEntry> {
    writable(api, caller, prefix).await?;
    let rec = act(&api.ctx).await?;
    ok(entry(api, caller, rec).await?)
}

/// `deleteConfig`.
pub(super) async fn delete(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
) -> Out<ConfigEntry> {
    change(&api, &caller, &prefix, async |ctx| operate::delete(ctx, &prefix, &caller.name).await).await
}

/// `updateAmount`.
pub(super) async fn amount(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
    Input(input): Input<AmountInput>,
) -> Out<ConfigEntry> {
    change(&api, &caller, &prefix, async |ctx| {
        operate::set_amount(ctx, &prefix, input.amount, &caller.name).await
    })
    .await
}

/// `pauseConfig`.
pub(super) async fn pause(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
    Input(input): Input<PauseInput>,
) -> Out<ConfigEntry> {
    change(&api, &caller, &prefix, async |ctx| {
        operate::pause(ctx, &prefix, &input.reason, &caller.name).await
    })
    .await
}

/// `resumeConfig`.
pub(super) async fn resume(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
) -> Out<ConfigEntry> {
    change(&api, &caller, &prefix, async |ctx| operate::resume(ctx, &prefix, &caller.name).await).await
}

/// `planConfig`: a Config the caller may change, or a new prefix (planning a creation). A prefix
/// that exists but is hidden from the caller answers as `createConfig` would: taken.
pub(super) async fn plan(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
    Input(mut input): Input<PlanInput>,
) -> Out<Plan> {
    if let Some(c) = input.config.take() {
        input.config = Some(named(c, &prefix)?);
    }
    match readable(&api, &caller, &prefix).await {
        Ok(_) => {}
        Err(e) if e.status() == StatusCode::NOT_FOUND && input.config.is_some() => {
            if api.ctx.ports.store.config(&prefix).await?.is_some() {
                return Err(ApiError::new(StatusCode::CONFLICT, format!("prefix {prefix:?} is taken")));
            }
        }
        Err(e) => return Err(e),
    }
    ok(operate::plan(&api.ctx, &prefix, input).await?)
}

/// `pauseAll`.
pub(super) async fn pause_all(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Input(input): Input<PauseInput>,
) -> Out<GlobalPause> {
    let p = operate::pause_all(&api.ctx, &input.reason, &caller.name).await?;
    ok(GlobalPause { paused: Some(p) })
}

/// `resumeAll`.
pub(super) async fn resume_all(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
) -> Out<GlobalPause> {
    operate::resume_all(&api.ctx, &caller.name).await?;
    ok(GlobalPause { paused: None })
}

/// `globalPause`.
pub(super) async fn global_pause(State(api): State<Api>) -> Out<GlobalPause> {
    ok(GlobalPause { paused: operate::paused_all(&api.ctx).await? })
}

/// One page of the audit trail of `prefix` (the global one for [`GLOBAL_AUDIT`]); `read`: the
/// entries already read from the page's offset, one more than its limit.
async fn trail(api: &Api, prefix: &str, page: &Page, read: Option<Vec<AuditEntry>>) -> Out<AuditList> {
    let (offset, limit) = (page.offset()?, page.limit()?);
    let mut entries = match read {
        Some(entries) => entries,
        None => api.ctx.ports.store.audit(prefix, offset, limit + 1).await?,
    };
    let continuation_token = Page::cut(&mut entries, offset, limit);
    ok(AuditList { entries, continuation_token })
}

/// `configHistory`: read as the Config is (404 alike when hidden or missing). A Config that is
/// gone keeps its trail: read by admins, and by readers of the owner groups its newest entry
/// names (an entry naming none, by admins only: who else could read it is unknown).
pub(super) async fn history(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
    Params(page): Params<Page>,
) -> Out<AuditList> {
    let store = &api.ctx.ports.store;
    // The first page of a gone Config's trail is read once: its first entry is the newest.
    let mut read = None;
    let visible = match store.config(&prefix).await {
        Ok(Some(rec)) => caller.may_read(&rec.value.config),
        Ok(None) if prefix == GLOBAL_AUDIT => false,
        Ok(None) => {
            let newest = match (page.offset(), page.limit()) {
                (Ok(0), Ok(limit)) => read.insert(store.audit(&prefix, 0, limit + 1).await?).first().cloned(),
                _ => store.audit(&prefix, 0, 1).await?.into_iter().next(),
            };
            match newest {
                Some(e) => {
                    caller.role == Role::Admin || (!e.owner.is_empty() && caller.may_read_owned(&e.owner))
                }
                None => false,
            }
        }
        Err(StoreError::Corrupt { .. }) => caller.role == Role::Admin,
        Err(e) => return Err(e.into()),
    };
    if !visible {
        return Err(ApiError::not_found(&format!("Config {prefix:?}")));
    }
    trail(&api, &prefix, &page, read).await
}

/// `history`: the global trail (admins).
pub(super) async fn global_history(State(api): State<Api>, Params(page): Params<Page>) -> Out<AuditList> {
    trail(&api, GLOBAL_AUDIT, &page, None).await
}
