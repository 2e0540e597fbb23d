//! `import_configs`: syncs Config records with the files in the configs directory (`*.yaml`,
//! `*.yml`, `*.json`: a Config per document; `*.cfg`: LUCI's `vms.cfg`, a Config per `vms`
//! block). Guard rails first: a file mistake never destroys a pool, and a file that cannot be
//! read, parsed or validated is applied not at all.
//!
//! * The revision is a hash of the file and the files its metadata reads: an unchanged revision
//!   leaves the record untouched; a changed one replaces the Config and keeps the current amount.
//! * A file that cannot be read, parsed or validated (empty, comment-only, `{}`, no or a bad
//!   prefix, an amount above `max_amount`, a zone or disk type the project lacks) changes nothing;
//!   its error goes on the status of the Config it holds and in the list of file errors, and no
//!   Config is orphaned that round.
//! * A prefix has one owner: the file recorded as the Config's source. Another file naming it
//!   (or a prefix of it, or one it is a prefix of) is refused, whatever the file names' order
//!   ([`ownership`]). A Config made over the API (source
//!   [`API_SOURCE`](crate::model::API_SOURCE)) is never orphaned or rewritten here, and a file
//!   naming its prefix is refused.
//! * A Config whose file is gone is first marked orphaned (WARN), and deleted with its VMs
//!   drained only `config_delete_grace` later if the file has not come back. A Config deleted
//!   over the API (orphaned by `operate::delete`) is deleted here the same way once its
//!   `delete_at` has passed.
//! * Every change is recorded in the Config's audit trail: by the file (`file:<name>`) when it
//!   creates, replaces or orphans a Config, by `import_configs` when a deletion's grace ends.
//! * A re-import keeps the current amount (set over the API, or by the weekly windows) and the
//!   pause, unless it changes the amount bounds (min, max or windows): the amount then restarts
//!   from the new bounds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::env::Ports;
use crate::work::ExpandConfig;

use crate::catalog::Verdict;
use crate::config::{self, Config, ConfigError};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{AuditAction, AuditEntry, ConfigRecord, FileError, FileProblem};
use crate::naming::parse_id;
use crate::ports::store::{Expect, Fence, Versioned, VmIndex};

pub mod files;
mod orphans;
pub mod ownership;
mod sources;
pub use files::{Loaded, load, load_all};
use orphans::{CORRUPT_ORPHANS, orphan, orphan_corrupt};
pub use ownership::{Plan, Read, plan};
use sources::{STAGE, file_actor, source_name};

/// Longest one round may spend reading and parsing the files.
const READ_LIMIT: Duration = Duration::from_secs(30);

/// Lists the names of the Config files of `dir`, sorted. Every name ends `.yaml`, `.yml`,
/// `.json` or `.cfg`, so none is ever [`API_SOURCE`](crate::model::API_SOURCE) (the source of Configs made over the API).
fn list(dir: &Path) -> Result<Vec<String>, TaskError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| TaskError::Invalid(format!("configs directory {}: {e}", dir.display())))?;
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json" || x == "cfg"))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    Ok(names)
}

/// Where each Config of a `vms.cfg` is, by (file name, prefix): for the errors found after
/// the files are read (the settings' trust, Compute's answers).
type Places = BTreeMap<(String, String), crate::config::luci::Located>;

/// The owner groups of each Config read, valid or not, by (file name, prefix): who may read its
/// file's errors.
type Owners = BTreeMap<(String, String), Vec<String>>;

/// Reads and validates every file, by name, off the async runtime and within [`READ_LIMIT`].
async fn read_all(
    ctx: &Ctx,
    names: Vec<String>,
) -> Result<(BTreeMap<String, Read>, Places, Owners), TaskError> {
    let (dir, limits) = (ctx.settings.configs_dir.clone(), ctx.settings.limits.clone());
    let read = tokio::task::spawn_blocking(move || read_files(&dir, &limits, names));
    match tokio::time::timeout(READ_LIMIT, read).await {
        Ok(Ok(files)) => Ok(files),
        Ok(Err(e)) => Err(TaskError::Invalid(format!("reading the Config files failed: {e}"))),
        Err(_) => Err(TaskError::Invalid(format!("reading the Config files took over {READ_LIMIT:?}"))),
    }
}

fn read_files(
    dir: &Path,
    limits: &crate::config::Limits,
    names: Vec<String>,
) -> (BTreeMap<String, Read>, Places, Owners) {
    let (mut places, mut owners) = (Places::new(), Owners::new());
    let files = names
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            let shown = path.display().to_string();
            let read = match load_all(&path, dir) {
                Ok(all) => {
                    for l in &all {
                        owners.insert((name.clone(), l.config.prefix.clone()), l.config.owner.clone());
                        if let Some(at) = &l.at {
                            places.insert((name.clone(), l.config.prefix.clone()), at.clone());
                        }
                    }
                    files::check(all, &name, &shown, limits)
                }
                Err(e) => files::refused(&name, &shown, e),
            };
            (name, read)
        })
        .collect();
    (files, places, owners)
}

/// `e`, about the Config `prefix` of the file `name`, said with its place in a `vms.cfg`.
fn placed(places: &Places, name: &str, prefix: &str, e: ConfigError) -> String {
    match places.get(&(name.to_owned(), prefix.to_owned())) {
        // As `name:line`: the report says the file's path once.
        Some(at) => at.explain(name, prefix, e).to_string(),
        None => e.to_string(),
    }
}

/// Stored Config records by prefix; a record that does not decode stands as an empty one of
/// unknown source (so a file naming its prefix rewrites it), and is reported.
async fn stored(
    ctx: &Ctx,
) -> Result<(BTreeMap<String, Versioned<ConfigRecord>>, BTreeSet<String>), TaskError> {
    let mut out: BTreeMap<String, Versioned<ConfigRecord>> =
        ctx.ports.store.configs().await?.into_iter().map(|c| (c.value.config.prefix.clone(), c)).collect();
    let mut corrupt = BTreeSet::new();
    for c in ctx.ports.store.corrupt_configs().await? {
        let msg = format!(
            "Config record {:?} does not decode ({}): rewritten from its file, or deleted if it has none",
            c.key, c.error
        );
        ctx.record_once(&c.key, STAGE, "corrupt", &msg).await?;
        let config = Config { prefix: c.key.clone(), ..Config::default() };
        // Its amount is unknown: keep every VM it has (the highest index + 1) until its file
        // is applied and expansion clamps it, so nothing is drained by mistake meanwhile.
        // (Not while its VM index cannot be read: `kept` would be 0 and drain them all.)
        let read = ctx.ports.store.vm_ids(VmIndex::OfConfig(c.key.clone())).await;
        let Some(ids) = crate::safety::heal::or_skip(ctx, STAGE, Some(&c.key), read).await? else { continue };
        let kept = ids.iter().filter_map(|id| parse_id(id)).map(|(_, i)| i + 1).max().unwrap_or(0);
        // A stand-in: no revision (so a file's Config replaces it), no source, unverified.
        let value = ConfigRecord { config, current_amount: kept, ..Default::default() };
        corrupt.insert(c.key.clone());
        out.insert(c.key, Versioned { value, version: c.version });
    }
    Ok((out, corrupt))
}

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    let (files, places, owners) = read_all(ctx, list(&ctx.settings.configs_dir)?).await?;
    let (stored, corrupt) = stored(ctx).await?;
    let sources = stored.iter().map(|(p, c)| (p.clone(), source_name(&c.value.source))).collect();
    let mut plan = plan(&files, &sources);
    let mut pushed = 0;
    // The Configs a tenant's sum is taken over: the stored ones, or what this round applied.
    let mut applied: BTreeMap<String, Config> = BTreeMap::new();
    for (prefix, (name, config, revision)) in std::mem::take(&mut plan.accept) {
        // The settings' trust, at every import: a Config stored under older settings shows it.
        let others = stored
            .iter()
            .filter(|(p, _)| !applied.contains_key(*p))
            .map(|(_, c)| &c.value.config)
            .chain(applied.values());
        if let Some(e) = ctx.settings.trust.problems(&config, others).into_iter().next() {
            let why = placed(&places, &name, &prefix, e);
            plan.rejects.push((name, prefix, why));
            continue;
        }
        match apply(ctx, stored.get(&prefix), &name, config.clone(), revision).await? {
            Ok(added) => {
                pushed += added;
                applied.insert(prefix, config);
            }
            Err(e) => {
                let why = placed(&places, &name, &prefix, e);
                plan.rejects.push((name, prefix, why));
            }
        }
    }
    // Files with errors block deletion this round: the Configs whose file is gone are kept.
    let kept: Vec<&Versioned<ConfigRecord>> = match plan.blocked() {
        true => stored
            .iter()
            .filter(|(p, c)| !plan.held.contains(*p) && !source_name(&c.value.source).is_empty())
            .map(|(_, c)| c)
            .collect(),
        false => Vec::new(),
    };
    report(ctx, &plan.rejects, &kept, &stored, &owners).await?;
    // A Config deleted over the API goes once its delete_at has passed, whatever the files say;
    // one applied while Compute could not be asked is checked here, as a file's would be.
    for cur in stored.values().filter(|c| !c.value.from_file()) {
        if cur.value.orphaned.is_some() {
            pushed += orphan(ctx, cur).await?;
        } else if !cur.value.verified {
            verify_api_config(ctx, cur).await?;
        }
    }
    for prefix in corrupt.iter().filter(|p| plan.held.contains(*p)) {
        store.unmark(CORRUPT_ORPHANS, prefix).await?;
    }
    if plan.blocked() {
        return Ok(pushed);
    }
    for (prefix, cur) in &stored {
        if plan.held.contains(prefix) {
            continue;
        }
        pushed += match corrupt.contains(prefix) {
            true => orphan_corrupt(ctx, cur).await?,
            false => orphan(ctx, cur).await?,
        };
    }
    Ok(pushed)
}

/// Checks an API Config stored unverified against Compute: valid, it is marked verified; a zone
/// or disk type the project lacks goes on its status (its operator must fix it over the API).
async fn verify_api_config(ctx: &Ctx, cur: &Versioned<ConfigRecord>) -> Result<(), TaskError> {
    let prefix = &cur.value.config.prefix;
    match ctx.validate(&mut cur.value.config.clone()).await {
        Verdict::Valid => {
            let rec = ConfigRecord { verified: true, ..cur.value.clone() };
            ctx.ports.store.put_config(&rec, Expect::Version(cur.version)).await?;
            Ok(())
        }
        Verdict::Invalid(e) => ctx.record_once(prefix, STAGE, "invalid", &e.to_string()).await,
        Verdict::Unknown(_) | Verdict::Unplaced(_) => Ok(()),
    }
}

/// Writes a changed Config's record under the admission lease (`expect`: what it replaces),
/// checked again against the Configs stored now (one may have come over the API since the
/// round read them): a new prefix must clash with none, and its tenant's rules must hold.
async fn admit(
    ctx: &Ctx,
    rec: &ConfigRecord,
    expect: Expect,
    fence: &Fence,
) -> Result<Result<bool, ConfigError>, TaskError> {
    let prefix = &rec.config.prefix;
    let stored = ctx.ports.store.configs().await?;
    let clash = stored.iter().map(|c| &c.value.config.prefix).find(|o| config::prefixes_clash(prefix, o));
    if let (Expect::Absent, Some(other)) = (expect, clash) {
        let rule = format!("prefix {prefix:?} and the stored Config {other:?}: one is a prefix of the other");
        return Ok(Err(ConfigError { field: format!("{prefix}.prefix"), rule }));
    }
    if let Some(e) =
        ctx.settings.trust.problems(&rec.config, stored.iter().map(|c| &c.value.config)).into_iter().next()
    {
        return Ok(Err(e));
    }
    Ok(Ok(ctx.ports.store.put_config_fenced(rec, expect, fence).await?))
}

/// Writes an accepted Config if it changed (or its file came back, or it is not yet checked
/// against Compute); returns the tasks pushed, or the error that keeps it out.
async fn apply(
    ctx: &Ctx,
    cur: Option<&Versioned<ConfigRecord>>,
    path: &str,
    config: Config,
    revision: String,
) -> Result<Result<usize, crate::config::ConfigError>, TaskError> {
    let prefix = config.prefix.clone();
    let same = cur.is_some_and(|c| c.value.revision == revision && c.value.source == path);
    if same && cur.is_some_and(|c| c.value.verified && c.value.orphaned.is_none()) {
        ctx.resolved(&prefix, &[STAGE]).await?; // a file that had an error is fine again
        return Ok(Ok(0));
    }
    // Read fresh: a file of this round may have taken a hostname already.
    if config.is_static() {
        let stored = ctx.ports.store.configs().await?;
        if let Some(e) = crate::config::providers::taken(&config, stored.iter().map(|c| &c.value.config)) {
            return Ok(Err(e));
        }
    }
    let mut config = config;
    let verified = match ctx.validate(&mut config).await {
        Verdict::Valid => true,
        Verdict::Invalid(e) => return Ok(Err(e)),
        // Not applied until Compute lists the region's zones: a file error until then (the stored
        // record, if any, is kept).
        Verdict::Unplaced(e) => return Ok(Err(e)),
        Verdict::Unknown(why) => {
            if !same {
                tracing::warn!(config = %prefix, file = path, error = %why, "cannot check the zone and disk types with Compute Engine now; imported, checked again on the next import");
            }
            false
        }
    };
    if same && cur.is_some_and(|c| c.value.orphaned.is_none() && c.value.verified == verified) {
        ctx.resolved(&prefix, &[STAGE]).await?;
        return Ok(Ok(0));
    }
    let mut rec = ConfigRecord {
        config,
        revision,
        current_amount: 0,
        source: path.to_owned(),
        orphaned: None,
        delete_at: None,
        verified,
        ..Default::default()
    };
    rec.succeed(cur.map(|c| &c.value), ctx.providers.declared(), ctx.now());
    if let Some(c) = cur {
        if !rec.config.is_static() {
            rec.current_amount = amount_after(&c.value, &rec.config, ctx.now());
        }
        if c.value.orphaned.is_some() {
            tracing::warn!(config = %prefix, file = path, "the Config file is back: deletion cancelled");
        }
        if !c.value.source.is_empty() && source_name(&c.value.source) != path {
            tracing::warn!(config = %prefix, from = %c.value.source, to = path, "the Config moved to another file");
        }
    }
    let expect = cur.map_or(Expect::Absent, |c| Expect::Version(c.version));
    let written = match ctx.admitting(async |fence| admit(ctx, &rec, expect, fence).await).await {
        Ok(Ok(written)) => written,
        Ok(Err(e)) => return Ok(Err(e)),
        // The lease is busy (an API apply asks Compute under it): this file waits for the next
        // round; the others of this one go on.
        Err(TaskError::Conflict(why)) => {
            tracing::debug!(config = %prefix, file = path, why, "admission busy: the next round applies it");
            return Ok(Ok(0));
        }
        Err(e) => return Err(e),
    };
    if !written {
        return Ok(Ok(0)); // changed under us: the next round sees it
    }
    ctx.resolved(&prefix, &[STAGE]).await?;
    let back = cur.is_some_and(|c| c.value.orphaned.is_some());
    if !same || back {
        ctx.audit(imported(&rec, cur.map(|c| &c.value), path, ctx.now())).await;
    }
    if same {
        return Ok(Ok(0));
    }
    tracing::info!(config = %prefix, file = path, revision = %rec.revision, "imported");
    Ok(Ok(ctx.push_many(&[ExpandConfig { prefix }]).await?))
}

/// The audit entry of a file's Config written over `old`: made by the file (`file:<name>`).
fn imported(
    rec: &ConfigRecord,
    old: Option<&ConfigRecord>,
    path: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> AuditEntry {
    let action = if old.is_some() { AuditAction::Update } else { AuditAction::Create };
    // A record that did not decode stood in with no revision.
    let before = old.map(|c| c.revision.as_str()).filter(|r| !r.is_empty());
    let mut detail = Vec::new();
    if old.is_some_and(|c| c.orphaned.is_some()) {
        detail.push("the file is back: deletion cancelled".to_owned());
    }
    if let Some(c) = old.filter(|c| !c.source.is_empty() && source_name(&c.source) != path) {
        detail.push(format!("moved from {}", c.source));
    }
    AuditEntry::on(rec, now, &file_actor(path), action).before(before).detail(detail.join("; "))
}

/// The current amount of a re-imported Config: kept (it may have been set over the API) while
/// the amount bounds (min, max, windows) stay as they were; restarted from the new bounds when
/// they change. A record whose bounds are unknown (it did not decode: no revision) keeps its
/// amount until expansion clamps it.
fn amount_after(old: &ConfigRecord, new: &Config, now: chrono::DateTime<chrono::Utc>) -> u32 {
    if old.config.amount == new.amount || old.revision.is_empty() {
        old.current_amount
    } else {
        new.amount.at(0, now)
    }
}

/// Records file errors: the list of them (kept with the time each was first seen), a WARN for
/// each new one, and an entry on the status of the Config the file holds; and the Configs `kept`
/// (their file gone, their deletion held by those errors), each with a WARN when first held.
async fn report(
    ctx: &Ctx,
    rejects: &[(String, String, String)],
    kept: &[&Versioned<ConfigRecord>],
    stored: &BTreeMap<String, Versioned<ConfigRecord>>,
    owners: &Owners,
) -> Result<(), TaskError> {
    // A file may hold several Configs, so several errors: each is known by its path and prefix.
    let before: BTreeMap<(String, String), FileError> = ctx
        .ports
        .store
        .file_errors()
        .await?
        .into_iter()
        .map(|e| ((e.path.clone(), e.prefix.clone()), e))
        .collect();
    let now = ctx.now();
    let mut errors = Vec::new();
    for (name, prefix, message) in rejects {
        let path = ctx.settings.configs_dir.join(name).display().to_string();
        // The Config stored of the error's prefix from this file, or another the file holds.
        let from_file = |c: &&Versioned<ConfigRecord>| source_name(&c.value.source) == *name;
        let held = stored.get(prefix).filter(from_file).or_else(|| stored.values().find(from_file));
        let seen = before.get(&(path.clone(), prefix.clone())).filter(|e| &e.message == message);
        if seen.is_none() {
            match held {
                Some(held) => {
                    let (held, zone) = (&held.value.config.prefix, &held.value.config.attributes.zone);
                    let msg = format!("{path} not applied: {message}");
                    ctx.record(held, STAGE, "invalid", &msg, zone, "").await?;
                }
                None => tracing::warn!(file = %path, prefix = %prefix, "Config file not applied: {message}"),
            }
        }
        // Who may read the entry: the owners the file names, else those of the Config it holds.
        let owner = owners.get(&(name.clone(), prefix.clone())).cloned();
        errors.push(FileError {
            unknown: Default::default(),
            path,
            prefix: prefix.clone(),
            since: seen.map_or(now, |e| e.since),
            message: message.clone(),
            kind: FileProblem::NotApplied,
            owner: owner.or_else(|| held.map(|c| c.value.config.owner.clone())),
        });
    }
    let bad: Vec<&str> = rejects.iter().map(|(f, _, _)| f.as_str()).collect();
    for cur in kept {
        let (prefix, source) = (&cur.value.config.prefix, &cur.value.source);
        let path = ctx.settings.configs_dir.join(source_name(source)).display().to_string();
        let message = format!(
            "the file is gone, but Config {prefix:?} is not deleted while these files have errors: {}",
            bad.join(", ")
        );
        let seen =
            before.get(&(path.clone(), prefix.clone())).filter(|e| e.kind == FileProblem::DeletionHeld);
        if seen.is_none() {
            tracing::warn!(file = %path, prefix = %prefix, "Config file gone; {message}");
        }
        errors.push(FileError {
            unknown: Default::default(),
            path,
            prefix: prefix.clone(),
            since: seen.map_or(now, |e| e.since),
            message,
            kind: FileProblem::DeletionHeld,
            owner: Some(cur.value.config.owner.clone()),
        });
    }
    if errors.len() != before.len()
        || errors.iter().any(|e| before.get(&(e.path.clone(), e.prefix.clone())) != Some(e))
    {
        ctx.ports.store.set_file_errors(&errors).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod hostile_tests;

#[cfg(test)]
mod audit_tests;

#[cfg(test)]
mod luci_tests;

#[cfg(test)]
mod files_tests;
