//! What the in-memory store holds ([`State`], behind its one lock) and the bookkeeping its
//! writes share: a compare-and-set check, a Config record written, a VM's sums counted and its
//! indexes dropped, the capped newest-first lists.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::ports::store::{Expect, StoreError, Versioned, VmIndex};
use crate::{
    model::AuditEntry, model::Backoff, model::ConfigRecord, model::Counts, model::ErrorEntry,
    model::FileError, model::Observed, model::Pause, model::SUMS, model::Sample, model::Sums, model::Vm,
    model::ledger::Spend,
};

/// Puts `item` at the head of `list` (newest first) and keeps its newest `keep`: the error and
/// audit lists.
pub(super) fn push_capped<T>(list: &mut Vec<T>, item: T, keep: usize) {
    list.insert(0, item);
    list.truncate(keep);
}

/// Adds `sign` × the counts of `bits` to `sums`.
pub(super) fn add(sums: &mut Sums, bits: u8, sign: i64) {
    for (i, s) in sums.iter_mut().enumerate() {
        if bits & (1 << i) != 0 {
            *s += sign;
        }
    }
}

/// Everything the store holds, behind one lock.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) configs: BTreeMap<String, Versioned<ConfigRecord>>,
    pub(super) vms: BTreeMap<String, Versioned<Vm>>,
    pub(super) uncreated: BTreeSet<String>,
    pub(super) created: BTreeSet<String>,
    pub(super) by_config: HashMap<String, BTreeSet<String>>,
    pub(super) by_host: HashMap<String, String>,
    /// Deadline of each VM with an instance.
    pub(super) deadlines: HashMap<String, DateTime<Utc>>,
    pub(super) bots: HashMap<String, Observed>,
    pub(super) errors: HashMap<String, Vec<ErrorEntry>>,
    /// Per Config (and `""`, the global list): the audit trail, newest first.
    pub(super) audit: HashMap<String, Vec<AuditEntry>>,
    pub(super) counts: HashMap<String, Counts>,
    /// What each VM adds to its Config's sums, as last written, and its zone.
    pub(super) counted: HashMap<String, (u8, String)>,
    /// Per Config: the sums, and whether they cover every VM.
    pub(super) sums: HashMap<String, (Sums, bool)>,
    /// Per Config: the sums per zone.
    pub(super) zone_sums: HashMap<String, BTreeMap<String, Sums>>,
    pub(super) counters: HashMap<(String, String), u64>,
    pub(super) file_errors: Vec<FileError>,
    /// The price book (`prices.rs`), as stored.
    pub(super) price_book: Option<String>,
    /// Per Config: its ledger (`model::spend`), kept after it is deleted.
    pub(super) ledgers: BTreeMap<String, BTreeMap<String, i64>>,
    /// Records planted as undecodable (tests): key → why; the version and indexes stay, as a
    /// raw overwrite in Redis leaves them.
    pub(super) corrupt_configs: BTreeMap<String, String>,
    pub(super) corrupt_vms: BTreeMap<String, String>,
    /// Derived keys planted with the wrong type (tests): `vm:cfg:<prefix>`, `sums:<prefix>`,
    /// `vm:deadline`, …; their reads fail until a rebuild (`safety/heal.rs`).
    pub(super) broken: BTreeSet<String>,
    pub(super) backoffs: HashMap<(String, String), Backoff>,
    pub(super) claims: HashMap<String, (String, Instant)>,
    pub(super) marks: HashMap<String, HashMap<String, DateTime<Utc>>>,
    pub(super) pause: Option<Pause>,
    /// The global pause planted as undecodable (tests).
    pub(super) corrupt_pause: bool,
    /// Time series by name: minute → sample (`series.rs`).
    pub(super) series: HashMap<String, BTreeMap<DateTime<Utc>, Sample>>,
}

#[cfg(any(test, feature = "testing"))]
pub(super) fn empty_config(prefix: &str) -> ConfigRecord {
    let config = crate::config::Config { prefix: prefix.to_owned(), ..Default::default() };
    ConfigRecord { config, ..Default::default() }
}

pub(super) fn holds<T>(current: Option<&Versioned<T>>, expect: Expect) -> bool {
    match (current, expect) {
        (None, Expect::Absent) => true,
        (Some(v), Expect::Version(n)) => v.version == n,
        _ => false,
    }
}

impl State {
    /// Adds `spend` to Config `prefix`'s ledger (with the write that made it).
    pub(super) fn spend(&mut self, prefix: &str, spend: &Spend) {
        if spend.is_empty() {
            return;
        }
        let book = self.ledgers.entry(prefix.to_owned()).or_default();
        for (k, v) in spend.pairs() {
            *book.entry(k.to_owned()).or_default() += v;
        }
        book.retain(|_, v| *v != 0);
    }
    /// The ids an index lists (an index being healed is an error, as on Redis).
    pub(super) fn vm_ids(&self, index: VmIndex) -> Result<Vec<String>, StoreError> {
        let s = self;
        Ok(match index {
            VmIndex::Uncreated => {
                s.healing("vm:uncreated").map(|()| s.uncreated.iter().cloned().collect())?
            }
            VmIndex::Created => s.healing("vm:created").map(|()| s.created.iter().cloned().collect())?,
            VmIndex::DueBy(t) => {
                s.healing("vm:deadline")?;
                let mut due: Vec<(&DateTime<Utc>, &String)> =
                    s.deadlines.iter().filter(|(_, d)| **d <= t).map(|(id, d)| (d, id)).collect();
                due.sort();
                return Ok(due.into_iter().map(|(_, id)| id.clone()).collect());
            }
            VmIndex::OfConfig(p) => {
                s.healing(&format!("vm:cfg:{p}"))?;
                s.by_config.get(&p).map(|v| v.iter().cloned().collect()).unwrap_or_default()
            }
            VmIndex::UncreatedOf(p) => {
                s.healing(&format!("vm:cfg:{p}"))?;
                s.healing("vm:uncreated")?;
                let of = s.by_config.get(&p);
                of.map(|v| v.iter().filter(|id| s.uncreated.contains(*id)).cloned().collect())
                    .unwrap_or_default()
            }
        })
    }

    /// Whether `holder` holds the lease `key` now.
    pub(super) fn holds_lease(&self, key: &str, holder: &str) -> bool {
        self.claims.get(key).is_some_and(|(h, until)| h == holder && *until > Instant::now())
    }

    /// Writes a Config record if `expect` holds (a corrupt one of its prefix is replaced).
    pub(super) fn put_config(&mut self, rec: &ConfigRecord, expect: Expect) -> bool {
        let cur = self.configs.get(&rec.config.prefix);
        if !holds(cur, expect) {
            return false;
        }
        let version = cur.map_or(1, |c| c.version + 1);
        self.configs.insert(rec.config.prefix.clone(), Versioned { value: rec.clone(), version });
        self.corrupt_configs.remove(&rec.config.prefix);
        true
    }

    /// Adds `sign` × what a VM counts (`bits`, in `zone`: its `Vm::place`, `""` for none) to its
    /// Config's sums and zone sums.
    pub(super) fn count(&mut self, config: &str, (bits, zone): &(u8, String), sign: i64) {
        add(&mut self.sums.entry(config.to_owned()).or_default().0, *bits, sign);
        let z = self.zone_sums.entry(config.to_owned()).or_default();
        add(z.entry(zone.clone()).or_insert([0; SUMS]), *bits, sign);
    }

    pub(super) fn unindex(&mut self, vm: &Vm) {
        self.uncreated.remove(&vm.id);
        self.created.remove(&vm.id);
        if let Some(s) = self.by_config.get_mut(&vm.config) {
            s.remove(&vm.id);
        }
        if self.by_host.get(&vm.hostname) == Some(&vm.id) {
            self.by_host.remove(&vm.hostname);
        }
        self.deadlines.remove(&vm.id);
    }
}
