//! What the operations share: who acts, the error an operation answers, the admission of a
//! Config (the checks a file's Config passes too), the audit entry of an action on a Config
//! named by prefix, a VM record as a read sees it, and the order VMs are listed in.

use chrono::{DateTime, Utc};

use crate::catalog::Verdict;
use crate::config::{Config, ConfigError, prefixes_clash};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{AuditAction, AuditEntry, ConfigRecord};
use crate::naming::parse_id;
use crate::ports::compute::ComputeError;
use crate::ports::store::StoreError;

/// Who asked (token name), for records and logs.
pub type Actor<'a> = &'a str;

/// Why an operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// No such Config or VM (`Config linux`, `VM linux-3`).
    #[error("{0} not found")]
    NotFound(String),
    /// The Config breaks these rules (every one, each naming its field).
    #[error("invalid Config")]
    Invalid(Vec<ConfigError>),
    /// The operation clashes with what exists (a prefix a file holds, a prefix clash, …).
    #[error("{0}")]
    Conflict(String),
    /// The store or the queues failed ([`OpError::transient`] says whether to try again).
    #[error(transparent)]
    Task(#[from] TaskError),
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        OpError::Task(e.into())
    }
}

impl From<gce_backend_queues::QueueError> for OpError {
    fn from(e: gce_backend_queues::QueueError) -> Self {
        OpError::Task(e.into())
    }
}

impl OpError {
    /// True for a failure worth trying again (the store or the queues were away, a race was
    /// lost); false for the rest.
    pub fn transient(&self) -> bool {
        matches!(self, OpError::Task(e) if e.class() == crate::error::Class::Transient)
    }
}

/// The refusal of an amount set on a Config that follows demand.
pub(super) fn follows_demand(prefix: &str) -> OpError {
    OpError::Invalid(vec![ConfigError {
        field: format!("{prefix}.amount"),
        rule: "this Config follows demand: its amount is busy + pending + demand.min_idle; bound it \
               with amount.min and amount.max, or pause it"
            .into(),
    }])
}

/// The refusal of an operation that adds or removes machines by other means than the list.
pub fn managed_by_list(prefix: &str, what: &str) -> OpError {
    OpError::Invalid(vec![ConfigError {
        field: format!("{prefix}.{what}"),
        rule: "static machines are managed by their list: add or remove hostnames in `machines` \
               (a removed machine finishes its task, then its bot is deleted)"
            .into(),
    }])
}

/// Largest page [`list_vms`] returns.
pub const MAX_PAGE: usize = 1000;

/// The stage operations record on a Config's status under.
pub(super) const STAGE: &str = "api";

/// What keeps a Config from being applied over the API, checked as a file's is.
#[derive(Debug, Default)]
pub(super) struct Admission {
    /// Every rule it breaks ([`Config::problems`], the service's limits, the project's zones
    /// and disk types).
    pub(super) invalid: Vec<ConfigError>,
    /// Who else holds its prefix (a file, or a Config whose prefix clashes with it).
    pub(super) conflict: Option<String>,
    /// False when Compute could not be asked about its zone and disk types.
    pub(super) verified: bool,
}

impl Admission {
    /// Applicable (and whether verified), or why not.
    pub(super) fn into_result(self) -> Result<bool, OpError> {
        match (self.invalid.is_empty(), self.conflict) {
            (false, _) => Err(OpError::Invalid(self.invalid)),
            (true, Some(c)) => Err(OpError::Conflict(c)),
            (true, None) => Ok(self.verified),
        }
    }
}

/// Checks `config` the way `import_configs` checks a file: every rule of one Config and the
/// service's limits, the project's zones and disk types (once those pass), its prefix's owner
/// (`stored`, the record under its prefix) and the across-Configs prefix rule against every
/// stored Config. A regional Config's zones are filled in (from the project's, in its region).
pub(super) async fn admit(
    ctx: &Ctx,
    config: &mut Config,
    stored: Option<&ConfigRecord>,
) -> Result<Admission, TaskError> {
    let mut a = Admission { invalid: config.problems(), verified: true, ..Admission::default() };
    a.invalid.extend(config.check_limits(&ctx.settings.limits).err());
    a.invalid.extend(no_files(config));
    // Read once: for the machines of a static pool, the tenant's sum and the prefix rule below.
    let configs = ctx.ports.store.configs().await?;
    // A field already found wrong (a malformed server) is said once.
    let trust = ctx.settings.trust.problems(config, configs.iter().map(|c| &c.value.config));
    let said: Vec<String> = a.invalid.iter().map(|e| e.field.clone()).collect();
    a.invalid.extend(trust.into_iter().filter(|e| !said.contains(&e.field)));
    a.invalid.extend(crate::config::providers::taken(config, configs.iter().map(|c| &c.value.config)));
    if a.invalid.is_empty() {
        match ctx.validate(config).await {
            Verdict::Valid => {}
            Verdict::Invalid(e) => a.invalid.push(e),
            // Not applied until Compute lists the region's zones: the caller may try again.
            Verdict::Unplaced(e) => return Err(ComputeError::from_http(Some(503), "", &e.to_string()).into()),
            Verdict::Unknown(why) => {
                tracing::warn!(config = %config.prefix, error = %why, "cannot check the zone and disk types with Compute Engine now; applied unverified");
                a.verified = false;
            }
        }
    }
    let prefix = &config.prefix;
    // Neither message names the other Config: the caller may not be allowed to read it.
    if stored.is_some_and(|r| r.from_file()) {
        a.conflict = Some(format!(
            "prefix {prefix} is held by a Config file; the API may change its amount and pause state only"
        ));
        return Ok(a);
    }
    let mut others: Vec<String> = configs.into_iter().map(|c| c.value.config.prefix).collect();
    others.extend(ctx.ports.store.corrupt_configs().await?.into_iter().map(|c| c.key));
    if others.iter().any(|o| prefixes_clash(prefix, o)) {
        a.conflict = Some(format!(
            "prefix {prefix} clashes with the prefix of an existing Config (one is a prefix of the other)"
        ));
    }
    Ok(a)
}

/// The API has no files: a `from_file` item is refused, saying so (never dropped unseen).
fn no_files(config: &Config) -> impl Iterator<Item = ConfigError> + '_ {
    config.attributes.metadata.iter().enumerate().filter(|(_, m)| m.from_file.is_some()).map(|(i, _)| {
        ConfigError {
            field: format!("{}.attributes.metadata[{i}].from_file", config.prefix),
            rule: "the API reads no files: send the value as from_text (`gce-backend configs apply -f FILE` reads a file's from_file items for you)".into(),
        }
    })
}

/// Changes the Config `prefix` with `change` (given the record and now; false leaves it
/// alone) and a compare-and-set (`tasks::update_config`). Returns the record as written (or as
/// found) and whether it was written.
pub(super) async fn update_config(
    ctx: &Ctx,
    prefix: &str,
    mut change: impl FnMut(&mut ConfigRecord, DateTime<Utc>) -> Result<bool, OpError>,
) -> Result<(ConfigRecord, bool), OpError> {
    let found = crate::records::writes::update_config(ctx, prefix, |rec| change(rec, ctx.now())).await?;
    found.ok_or_else(|| OpError::NotFound(format!("Config {prefix}")))
}

/// Records `action` by `by` in the audit trail of the Config `prefix` as it is stored now (its
/// revision and owner); one whose record cannot be read gets an entry naming no revision and no
/// owner (read by admins only once the Config is gone).
pub(super) async fn audit_on(ctx: &Ctx, prefix: &str, by: Actor<'_>, action: AuditAction, detail: String) {
    let now = ctx.now();
    let e = match ctx.ports.store.config(prefix).await {
        Ok(Some(rec)) => AuditEntry::on(&rec.value, now, by, action),
        _ => AuditEntry { prefix: prefix.to_owned(), ..AuditEntry::global(now, by, action) },
    };
    ctx.audit(e.detail(detail)).await;
}

/// The order VMs are listed in: by index, ids that do not parse last.
pub(super) fn order(id: &str) -> (u32, &str) {
    parse_id(id).map_or((u32::MAX, id), |(_, i)| (i, id))
}

/// `ids` sorted by [`order`].
pub(super) fn by_index(mut ids: Vec<String>) -> Vec<String> {
    ids.sort_by(|a, b| order(a).cmp(&order(b)));
    ids
}
