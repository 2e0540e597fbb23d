//! Healing derived keys: a VM index, the deadline or hostname index or a Config's sums that is of
//! the wrong type, missing or disagrees with the VM records is rebuilt from them
//! ([`Store::rebuild`](crate::ports::store::Store::rebuild)), logged once with what was rebuilt and
//! noted on the Config's status; a cron job that cannot read such a key meanwhile skips what
//! needs it ([`or_skip`]) and does the rest. `count_vms`'s cron job runs the
//! checks ([`check`]).

use crate::env::Env;
use crate::error::TaskError;
use crate::ports::store::{Scope, StoreError};
use crate::work::ManageBot;

/// The stage of the status entries this module writes and resolves.
pub const STAGE: &str = "index";

/// Mark space of full comparisons: `*` → when the last one ran.
const VERIFIED: &str = "verified";

/// Rebuilds every scope flagged for it (by a write or read that met a key of the wrong type, or
/// because a shared key is of the wrong type or disagrees in size with the records) and every
/// Config whose own keys look unsound; and once per `timing.sweep`, everything, entry by entry
/// (a rebuild that finds nothing wrong writes nothing), so keys missing or wrong without a sign
/// in those checks are found within that period, and VM records that do not decode are
/// quarantined.
pub async fn check(ctx: &Env) -> Result<(), TaskError> {
    let mut scopes = ctx.ports.store.heal_requests().await?;
    if !scopes.contains(&Scope::All) {
        for c in ctx.ports.store.configs().await? {
            let prefix = c.value.config.prefix;
            if !ctx.ports.store.derived_sound(&prefix).await?
                && !scopes.contains(&Scope::Config(prefix.clone()))
            {
                scopes.push(Scope::Config(prefix));
            }
        }
        let last = ctx.ports.store.marks(VERIFIED).await?.into_iter().find(|(k, _)| k == "*").map(|(_, t)| t);
        if last.is_none_or(|t| ctx.now() - t >= ctx.settings.timing.sweep.chrono()) {
            scopes = vec![Scope::All];
        }
    }
    for scope in &scopes {
        rebuild(ctx, scope).await?;
        if *scope == Scope::All {
            ctx.ports.store.unmark(VERIFIED, "*").await?;
            ctx.ports.store.mark(VERIFIED, "*", ctx.now()).await?;
        }
    }
    Ok(())
}

/// Rebuilds `scope`; when anything changed, logs it once (WARN) and notes it on the Config's
/// status, resolving the notes of cron jobs that skipped it meanwhile.
async fn rebuild(ctx: &Env, scope: &Scope) -> Result<(), TaskError> {
    let r = ctx.ports.store.rebuild(scope).await?;
    if !r.corrupt.is_empty() {
        // Their handler reads them, which quarantines each (see `tasks::quarantine`).
        tracing::warn!(scope = %scope, vms = ?r.corrupt, "VM records that do not decode: quarantined");
        ctx.push_many(&r.corrupt.iter().map(|id| ManageBot { id: id.clone() }).collect::<Vec<_>>()).await?;
    }
    if !r.changed() {
        return Ok(());
    }
    tracing::warn!(
        scope = %scope,
        replaced = ?r.replaced,
        vms = r.vms,
        fixed = r.fixed,
        stale = r.stale,
        recounted = ?r.recounted,
        "derived keys rebuilt from the VM records"
    );
    let what = format!(
        "indexes rebuilt from {} VM records: {} replaced (wrong type), {} VMs' entries fixed, {} stale entries dropped{}",
        r.vms,
        if r.replaced.is_empty() { "none".to_owned() } else { r.replaced.join(", ") },
        r.fixed,
        r.stale,
        if r.recounted.is_empty() {
            String::new()
        } else {
            format!(", sums counted again ({})", r.recounted.join(", "))
        }
    );
    // The Configs it concerns: the one rebuilt, those whose own keys were replaced or recounted.
    let own = r.replaced.iter().filter_map(|k| k.strip_prefix("vm:cfg:").or_else(|| k.strip_prefix("sums:")));
    let mut configs: Vec<String> =
        r.recounted.iter().map(String::as_str).chain(own).map(str::to_owned).collect();
    if let Scope::Config(p) = scope {
        configs.push(p.clone());
    }
    configs.sort();
    configs.dedup();
    for prefix in configs {
        ctx.record(&prefix, STAGE, "rebuilt", &what, "", "").await?;
        ctx.ports.store.resolve_errors(&prefix, &[STAGE], ctx.now()).await?;
    }
    Ok(())
}

/// A cron job's read of a derived key: `Ok(None)` when the key is being rebuilt (reported once:
/// on `prefix`'s status when it is one Config's, else at WARN), so the job skips what needs it and
/// does the rest; other errors as they are.
pub async fn or_skip<T>(
    ctx: &Env,
    job: &str,
    prefix: Option<&str>,
    read: Result<T, StoreError>,
) -> Result<Option<T>, TaskError> {
    match read {
        Ok(v) => Ok(Some(v)),
        Err(StoreError::Healing { key }) => {
            let msg = format!(
                "{job}: cannot read {key} (wrong type) until it is rebuilt from the VM records; skipped"
            );
            match prefix {
                Some(p) => ctx.record_once(p, STAGE, "unreadable", &msg).await?,
                None => tracing::warn!(job, key, "{msg}"),
            }
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}
