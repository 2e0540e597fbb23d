//! The datastore port: Config, VM and status records with compare-and-set, and the indexes each
//! cron job reads (VMs without an instance, VMs with one, VMs of a Config, VM by hostname).

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::{
    model::AuditEntry, model::Backoff, model::ConfigRecord, model::Counts, model::ErrorEntry,
    model::FileError, model::Observed, model::Pause, model::Sample, model::Series, model::Sums, model::Vm,
    model::ledger::Spend,
};

/// A datastore error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The datastore could not be reached or failed: worth retrying.
    #[error("store: {0}")]
    Unavailable(String),
    /// A stored record does not decode, or a key holds the wrong type: retrying will not help;
    /// the entity is skipped, reported and repaired where it can be.
    #[error("store: corrupt {key}: {error}")]
    Corrupt {
        /// The record or key (`vm linux-3`, `cfg linux`, `vm:cfg:linux`).
        key: String,
        /// What is wrong.
        error: String,
        /// The version of the record, read with it (a repair names it in its compare-and-set).
        version: Option<u64>,
    },
    /// A derived key (an index or a Config's sums) holds the wrong type: it is flagged and
    /// rebuilt from the VM records shortly ([`Store::rebuild`]); the caller waits for that (a
    /// task is looked at again without spending an attempt; a cron job skips what it needs).
    #[error("store: index {key} cannot be read (wrong type): being rebuilt from the VM records")]
    Healing {
        /// The key (`vm:cfg:linux`, `vm:deadline`, `sums:linux`).
        key: String,
    },
    /// A record a newer build wrote in a format this one does not act on
    /// ([`crate::model::FORMAT`]): left to that build, neither touched nor taken for corrupt.
    #[error("store: {key}: {}", crate::model::Undecoded::Newer(*format))]
    Newer {
        /// The record (`vm linux-3`, `cfg linux`).
        key: String,
        /// Its format.
        format: u32,
    },
}

impl StoreError {
    /// A corrupt record or key.
    pub fn corrupt(key: impl Into<String>, error: impl std::fmt::Display) -> Self {
        StoreError::Corrupt { key: key.into(), error: error.to_string(), version: None }
    }

    /// A corrupt record read at `version`.
    pub fn corrupt_at(key: impl Into<String>, error: impl std::fmt::Display, version: u64) -> Self {
        StoreError::Corrupt { key: key.into(), error: error.to_string(), version: Some(version) }
    }
}

/// A stored record that does not decode, with the version a repair must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRecord {
    /// Its key (Config prefix or VM id).
    pub key: String,
    /// Its version.
    pub version: u64,
    /// Why it does not decode.
    pub error: String,
}

/// A record with the version a compare-and-set must name.
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned<T> {
    /// The record.
    pub value: T,
    /// Its version.
    pub version: u64,
}

/// A lease a write must still hold when it lands ([`Store::lease`]): the fence that keeps a
/// holder that stalled past its lease from writing after the next holder took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The lease's key.
    pub key: String,
    /// Who must hold it.
    pub holder: String,
}

/// Which derived keys a rebuild covers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// One Config's: its VM index and sums, and its VMs' entries in the shared indexes.
    Config(String),
    /// Every derived key: the shared indexes (VMs with and without an instance, by hostname, by
    /// deadline, what each VM counts, prefixes with VMs) and every Config's.
    All,
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Config(p) => write!(f, "Config {p}"),
            Scope::All => f.write_str("every index"),
        }
    }
}

/// What a rebuild found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rebuilt {
    /// Keys that held the wrong type, dropped and built again.
    pub replaced: Vec<String>,
    /// VM records read.
    pub vms: usize,
    /// Index entries added or corrected (records whose entries were missing or wrong).
    pub fixed: usize,
    /// Entries removed that named a VM without a record.
    pub stale: usize,
    /// Configs whose sums disagreed with their VMs (counted again).
    pub recounted: Vec<String>,
    /// VMs whose record does not decode (indexed as VMs without an instance; to be quarantined).
    pub corrupt: Vec<String>,
}

impl Rebuilt {
    /// Whether the rebuild changed anything (the keys disagreed with the records).
    pub fn changed(&self) -> bool {
        !self.replaced.is_empty() || self.fixed > 0 || self.stale > 0 || !self.recounted.is_empty()
    }
}

/// What a write expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// No record yet.
    Absent,
    /// The record at this version.
    Version(u64),
}

/// Which VMs to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmIndex {
    /// Without an instance (`url` empty).
    Uncreated,
    /// With an instance.
    Created,
    /// Of one Config.
    OfConfig(String),
    /// Of one Config, without an instance (read as one intersection: the waiting ones only).
    UncreatedOf(String),
    /// With an instance whose deadline ([`Vm::deadline`]) is this time or earlier, soonest
    /// first: kept in step with every VM write, so the due ones are found without a scan.
    DueBy(DateTime<Utc>),
}

/// The datastore.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// One Config.
    async fn config(&self, prefix: &str) -> Result<Option<Versioned<ConfigRecord>>, StoreError>;
    /// Every Config that decodes (there are few); see [`Store::corrupt_configs`] for the rest.
    async fn configs(&self) -> Result<Vec<Versioned<ConfigRecord>>, StoreError>;
    /// Config records that do not decode.
    async fn corrupt_configs(&self) -> Result<Vec<CorruptRecord>, StoreError>;
    /// Writes a Config if `expect` holds (a corrupt record is replaced when its version is
    /// named); false when it did not.
    async fn put_config(&self, rec: &ConfigRecord, expect: Expect) -> Result<bool, StoreError>;
    /// [`Store::put_config`] only while `fence`'s holder holds its lease (false otherwise).
    async fn put_config_fenced(
        &self,
        rec: &ConfigRecord,
        expect: Expect,
        fence: &Fence,
    ) -> Result<bool, StoreError>;
    /// Deletes a Config at `version`.
    async fn delete_config(&self, prefix: &str, version: u64) -> Result<bool, StoreError>;
    /// One VM; [`StoreError::Corrupt`] when its record does not decode.
    async fn vm(&self, id: &str) -> Result<Option<Versioned<Vm>>, StoreError>;
    /// The version of a VM's record, whether or not it decodes.
    async fn vm_version(&self, id: &str) -> Result<Option<u64>, StoreError>;
    /// Writes a VM if `expect` holds, keeping the indexes in step (a corrupt record is replaced
    /// when its version is named), and adds `spend` to its Config's ledger in the same
    /// transaction (so a change of what it is billed as is counted exactly once). A write adds
    /// one to the version (a new record has version 1).
    async fn put_vm_spending(&self, vm: &Vm, expect: Expect, spend: &Spend) -> Result<bool, StoreError>;
    /// [`Store::put_vm_spending`] changing no ledger (the reconcile logic writes through
    /// `meter`, which works out what to add).
    async fn put_vm(&self, vm: &Vm, expect: Expect) -> Result<bool, StoreError> {
        self.put_vm_spending(vm, expect, &Spend::default()).await
    }
    /// Deletes a VM at `version` (with its index entries and bot observation), corrupt or not,
    /// adding `spend` to its Config's ledger in the same transaction.
    async fn delete_vm_spending(&self, id: &str, version: u64, spend: &Spend) -> Result<bool, StoreError>;
    /// [`Store::delete_vm_spending`] changing no ledger.
    async fn delete_vm(&self, id: &str, version: u64) -> Result<bool, StoreError> {
        self.delete_vm_spending(id, version, &Spend::default()).await
    }
    /// A Config's ledger as kept (field → integer; see `model::spend`), kept after the Config
    /// is deleted; empty when it has none.
    async fn ledger(&self, prefix: &str) -> Result<BTreeMap<String, i64>, StoreError>;
    /// Prefixes that have a ledger (Configs deleted since included).
    async fn ledger_configs(&self) -> Result<Vec<String>, StoreError>;
    /// Ids of the VMs in an index.
    async fn vm_ids(&self, index: VmIndex) -> Result<Vec<String>, StoreError>;
    /// The VM of each hostname, in order.
    async fn vms_by_hostname(&self, hostnames: &[String]) -> Result<Vec<Option<String>>, StoreError>;
    /// Prefixes that have VMs (Configs removed since included).
    async fn vm_configs(&self) -> Result<Vec<String>, StoreError>;
    /// Records bot observations by hostname.
    async fn put_bots(&self, bots: &[Observed]) -> Result<(), StoreError>;
    /// The last observation of a bot.
    async fn bot(&self, hostname: &str) -> Result<Option<Observed>, StoreError>;
    /// The last observations of several bots, in order.
    async fn bots(&self, hostnames: &[String]) -> Result<Vec<Option<Observed>>, StoreError> {
        let mut out = Vec::with_capacity(hostnames.len());
        for h in hostnames {
            out.push(self.bot(h).await?);
        }
        Ok(out)
    }
    /// The hostnames of every bot observation kept.
    async fn observed(&self) -> Result<Vec<String>, StoreError>;
    /// Drops the observations of these bots.
    async fn forget_bots(&self, hostnames: &[String]) -> Result<(), StoreError>;
    /// Adds an error to a Config's status (the last 20 are kept).
    async fn push_error(&self, prefix: &str, e: &ErrorEntry) -> Result<(), StoreError>;
    /// A Config's recent errors, newest first.
    async fn errors(&self, prefix: &str) -> Result<Vec<ErrorEntry>, StoreError>;
    /// Marks a Config's unresolved errors of `stage` as resolved at `now` (the stage succeeded).
    async fn resolve_errors(
        &self,
        prefix: &str,
        stages: &[&str],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// Adds one to a Config's counter `what` (`dead_tasks`, `task_failures`).
    async fn bump(&self, prefix: &str, what: &str) -> Result<(), StoreError>;
    /// A Config's counter `what`.
    async fn counter(&self, prefix: &str, what: &str) -> Result<u64, StoreError>;
    /// Adds `e` to the audit trail of its Config (`e.prefix`; the global list for
    /// [`crate::model::GLOBAL_AUDIT`]), keeping the newest `keep` (one transaction). Survives
    /// the Config's deletion ([`Store::drop_status`] leaves it).
    async fn push_audit(&self, e: &AuditEntry, keep: usize) -> Result<(), StoreError>;
    /// Up to `limit` entries of a Config's audit trail (or the global list), newest first,
    /// skipping the newest `offset`; entries that do not decode are left out.
    async fn audit(&self, prefix: &str, offset: usize, limit: usize) -> Result<Vec<AuditEntry>, StoreError>;
    /// Replaces the errors of Config files that hold no Config.
    async fn set_file_errors(&self, errors: &[FileError]) -> Result<(), StoreError>;
    /// The errors of Config files that hold no Config, by path.
    async fn file_errors(&self) -> Result<Vec<FileError>, StoreError>;
    /// Replaces the price book (Compute Engine's SKUs, where and when read): one record.
    async fn put_price_book(&self, book: &crate::prices::book::PriceBook) -> Result<(), StoreError>;
    /// The price book, if one is stored (one that does not decode reads as none).
    async fn price_book(&self) -> Result<Option<crate::prices::book::PriceBook>, StoreError>;
    /// Writes a Config's counts.
    async fn put_counts(&self, prefix: &str, counts: &Counts) -> Result<(), StoreError>;
    /// A Config's counts.
    async fn counts(&self, prefix: &str) -> Result<Option<Counts>, StoreError>;
    /// The sums of [`crate::model::Vm::counted`] over a Config's VMs, kept in step with every VM
    /// write and delete (in the same transaction); `None` until its VMs written before sums were
    /// kept are counted in ([`Store::count_in`]) and [`Store::sums_complete`] says so
    /// (`counts::tally` does both, once per Config).
    async fn sums(&self, prefix: &str) -> Result<Option<Sums>, StoreError>;
    /// A Config's sums and, read with them, its sums per zone (the same sums over its VMs in each
    /// zone, zone `""` for VMs without one; a VM on a fallback rank in the zone's entry for the
    /// rank, [`crate::model::Vm::place`]), kept with them; `None` while [`Store::sums`] is.
    /// A zone none of its VMs is in may be missing or all zero. They disagree with the totals
    /// only after VMs were written by a build that keeps no zone sums: `counts::zone_sums` then
    /// has them counted again ([`Store::recount_zones`]).
    async fn zone_sums(&self, prefix: &str) -> Result<Option<(Sums, BTreeMap<String, Sums>)>, StoreError>;
    /// Counts a Config's zone sums again from its VMs (O(its VMs), at once).
    async fn recount_zones(&self, prefix: &str) -> Result<(), StoreError>;
    /// Counts in a VM written before sums (or zone sums) were kept: nothing if it is already
    /// counted, gone, or written again since `vm.version`.
    async fn count_in(&self, vm: &Versioned<Vm>) -> Result<(), StoreError>;
    /// Marks a Config's sums as covering every one of its VMs.
    async fn sums_complete(&self, prefix: &str) -> Result<(), StoreError>;
    /// Records `sample` in `series`, keeping its newest [`crate::model::KEEP_SAMPLES`]: one per
    /// minute (a second sample of the same minute replaces the first, so a tick run twice writes
    /// one).
    async fn put_sample(&self, series: &Series, sample: &Sample) -> Result<(), StoreError>;
    /// The samples of `series`, oldest first (one that does not decode is left out).
    async fn samples(&self, series: &Series) -> Result<Vec<Sample>, StoreError>;
    /// Drops a Config's status (errors, counts, counters, sums, placements, its series).
    async fn drop_status(&self, prefix: &str) -> Result<(), StoreError>;
    /// The backoff of a (project, zone).
    async fn backoff(&self, project: &str, zone: &str) -> Result<Option<Backoff>, StoreError>;
    /// Sets (`Some`) or clears (`None`) the backoff of a (project, zone).
    async fn set_backoff(&self, project: &str, zone: &str, b: Option<&Backoff>) -> Result<(), StoreError>;
    /// The backoffs of several (project, zone) scopes at once, in order.
    async fn backoffs(&self, scopes: &[(&str, &str)]) -> Result<Vec<Option<Backoff>>, StoreError> {
        let mut out = Vec::with_capacity(scopes.len());
        for (project, zone) in scopes {
            out.push(self.backoff(project, zone).await?);
        }
        Ok(out)
    }
    /// Ends the backoffs of several (project, zone) scopes at once.
    async fn clear_backoffs(&self, scopes: &[(&str, &str)]) -> Result<(), StoreError> {
        for (project, zone) in scopes {
            self.set_backoff(project, zone, None).await?;
        }
        Ok(())
    }
    /// True for the first caller only, for `ttl` (cron ticks run once across processes).
    async fn claim(&self, key: &str, ttl: std::time::Duration) -> Result<bool, StoreError>;
    /// Takes `key` for `holder` for `ttl`, or renews it when `holder` has it already; false
    /// while another holds it (a lease: a holder that dies stops holding it after `ttl`).
    async fn lease(&self, key: &str, holder: &str, ttl: std::time::Duration) -> Result<bool, StoreError>;
    /// Extends `holder`'s lease by `ttl` if it still has it; false once it lapsed (a lapsed
    /// lease is never taken back this way, even when free: another may have held it since).
    async fn renew(&self, key: &str, holder: &str, ttl: std::time::Duration) -> Result<bool, StoreError>;
    /// Gives a lease up, if `holder` still has it (a late release never frees the next
    /// holder's).
    async fn release(&self, key: &str, holder: &str) -> Result<(), StoreError>;
    /// Marks `key` in `space` as seen at `now` unless already marked; returns the first mark's
    /// time (two-phase cleanups: act only on what stays marked for a grace period).
    async fn mark(&self, space: &str, key: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, StoreError>;
    /// Removes a mark.
    async fn unmark(&self, space: &str, key: &str) -> Result<(), StoreError>;
    /// Every mark of `space`.
    async fn marks(&self, space: &str) -> Result<Vec<(String, DateTime<Utc>)>, StoreError>;
    /// The mark of `key` in `space`, if any (read only).
    async fn marked(&self, space: &str, key: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        Ok(self.marks(space).await?.into_iter().find(|(k, _)| k == key).map(|(_, t)| t))
    }
    /// The global pause (every Config), if set; [`StoreError::Corrupt`] when it does not
    /// decode (read through `ctx::global_pause`, which takes that as paused).
    async fn global_pause(&self) -> Result<Option<Pause>, StoreError>;
    /// Sets (`Some`) or lifts (`None`) the global pause.
    async fn set_global_pause(&self, pause: Option<&Pause>) -> Result<(), StoreError>;
    /// What needs a rebuild: scopes flagged by a write or a read that met a derived key of the
    /// wrong type (a write leaves such a key alone and does the rest), and [`Scope::All`] while
    /// a shared index holds the wrong type or the shared indexes disagree in size with the VM
    /// records. Cheap: a few O(1) reads.
    async fn heal_requests(&self) -> Result<Vec<Scope>, StoreError>;
    /// Whether a Config's derived keys look sound, cheaply: of the right type, and its VM index
    /// as large as its sums say (both are written in one transaction, so they only disagree
    /// after a bad write from outside).
    async fn derived_sound(&self, prefix: &str) -> Result<bool, StoreError>;
    /// Rebuilds the derived keys of `scope` from the VM records and clears its flag: a key of
    /// the wrong type is dropped and built again, missing or wrong entries are written, entries
    /// naming no VM removed, sums counted again. Fenced: an entry is written only while its VM
    /// is at the version it was computed from, and a VM written meanwhile keeps the entries its
    /// own write made, so a rebuild racing writes loses none of them.
    async fn rebuild(&self, scope: &Scope) -> Result<Rebuilt, StoreError>;
    /// Waits until the replicas the deployment counts on hold every write this process made so
    /// far (an operator's write is answered only then); [`StoreError::Unavailable`] when they
    /// did not acknowledge in time. A store without replicas has nothing to wait for.
    async fn replicated(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// What changes whenever the store may have lost acknowledged writes: a new primary took
    /// over, or the server started again (Redis's replication id; on a cluster, its primaries').
    /// `None`: a store that never loses what it acknowledged (in memory, for the process's life).
    async fn generation(&self) -> Result<Option<String>, StoreError> {
        Ok(None)
    }
}
