//! In-memory `Store` with the same compare-and-set semantics as the Redis one (the embedded
//! default, and handler tests).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::ports::store::{
    CorruptRecord, Expect, Fence, Rebuilt, Scope, Store, StoreError, Versioned, VmIndex,
};
use crate::{
    model::AuditEntry, model::Backoff, model::ConfigRecord, model::Counts, model::ErrorEntry,
    model::FileError, model::KEEP_ERRORS, model::Observed, model::Pause, model::SUMS, model::Sample,
    model::Series, model::Sums, model::Vm, model::ledger::Spend,
};

mod heal;
mod prices;
mod series;
mod state;

#[cfg(any(test, feature = "testing"))]
use state::empty_config;
use state::{State, add, holds, push_capped};

/// The in-memory store.
#[derive(Debug, Default)]
pub struct MemoryStore(Mutex<State>);

impl MemoryStore {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes a stored Config record undecodable, as a raw write over it in Redis would.
    #[cfg(any(test, feature = "testing"))]
    pub fn plant_corrupt_config(&self, prefix: &str) {
        let mut s = self.lock();
        s.configs
            .entry(prefix.to_owned())
            .or_insert_with(|| Versioned { value: empty_config(prefix), version: 1 });
        s.corrupt_configs.insert(prefix.to_owned(), "expected value at line 1 column 2".into());
    }

    /// Makes a stored VM record undecodable.
    #[cfg(any(test, feature = "testing"))]
    pub fn plant_corrupt_vm(&self, id: &str) {
        self.lock().corrupt_vms.insert(id.to_owned(), "expected value at line 1 column 2".into());
    }

    /// Makes the global pause record undecodable (until it is set or lifted again).
    #[cfg(any(test, feature = "testing"))]
    pub fn plant_corrupt_pause(&self) {
        self.lock().corrupt_pause = true;
    }

    /// Makes the VM index of a Config a key of the wrong type.
    #[cfg(any(test, feature = "testing"))]
    pub fn plant_broken_index(&self, prefix: &str) {
        self.plant_broken_key(&format!("vm:cfg:{prefix}"));
    }

    /// Empties the deadline index, as VMs written by a build without it left it (tests).
    #[cfg(any(test, feature = "testing"))]
    pub fn forget_deadlines(&self) {
        self.lock().deadlines.clear();
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn config(&self, prefix: &str) -> Result<Option<Versioned<ConfigRecord>>, StoreError> {
        let s = self.lock();
        if let Some(e) = s.corrupt_configs.get(prefix) {
            return Err(StoreError::corrupt(format!("cfg {prefix}"), e));
        }
        match s.configs.get(prefix) {
            Some(c) if !c.value.format.readable() => {
                Err(StoreError::Newer { key: format!("cfg {prefix}"), format: c.value.format.0 })
            }
            c => Ok(c.cloned()),
        }
    }

    async fn configs(&self) -> Result<Vec<Versioned<ConfigRecord>>, StoreError> {
        let s = self.lock();
        Ok(s.configs
            .iter()
            .filter(|(p, c)| !s.corrupt_configs.contains_key(*p) && c.value.format.readable())
            .map(|(_, c)| c.clone())
            .collect())
    }

    async fn corrupt_configs(&self) -> Result<Vec<CorruptRecord>, StoreError> {
        let s = self.lock();
        Ok(s.corrupt_configs
            .iter()
            .filter_map(|(p, e)| {
                s.configs.get(p).map(|c| CorruptRecord {
                    key: p.clone(),
                    version: c.version,
                    error: e.clone(),
                })
            })
            .collect())
    }

    async fn put_config(&self, rec: &ConfigRecord, expect: Expect) -> Result<bool, StoreError> {
        Ok(self.lock().put_config(rec, expect))
    }

    async fn put_config_fenced(
        &self,
        rec: &ConfigRecord,
        e: Expect,
        fence: &Fence,
    ) -> Result<bool, StoreError> {
        let mut s = self.lock();
        Ok(s.holds_lease(&fence.key, &fence.holder) && s.put_config(rec, e))
    }

    async fn delete_config(&self, prefix: &str, version: u64) -> Result<bool, StoreError> {
        let mut s = self.lock();
        if !holds(s.configs.get(prefix), Expect::Version(version)) {
            return Ok(false);
        }
        s.configs.remove(prefix);
        s.corrupt_configs.remove(prefix);
        Ok(true)
    }

    async fn vm(&self, id: &str) -> Result<Option<Versioned<Vm>>, StoreError> {
        let s = self.lock();
        if let Some(e) = s.corrupt_vms.get(id) {
            let version = s.vms.get(id).map_or(0, |v| v.version);
            return Err(StoreError::corrupt_at(format!("vm {id}"), e, version));
        }
        match s.vms.get(id) {
            Some(v) if !v.value.format.readable() => {
                Err(StoreError::Newer { key: format!("vm {id}"), format: v.value.format.0 })
            }
            v => Ok(v.cloned()),
        }
    }

    async fn vm_version(&self, id: &str) -> Result<Option<u64>, StoreError> {
        Ok(self.lock().vms.get(id).map(|v| v.version))
    }

    async fn put_vm_spending(&self, vm: &Vm, expect: Expect, spend: &Spend) -> Result<bool, StoreError> {
        let mut s = self.lock();
        let cur = s.vms.get(&vm.id).cloned();
        if !holds(cur.as_ref(), expect) {
            return Ok(false);
        }
        s.spend(&vm.config, spend);
        if let Some(old) = &cur {
            s.unindex(&old.value);
        }
        if vm.instance.is_none() {
            s.uncreated.insert(vm.id.clone());
        } else {
            s.created.insert(vm.id.clone());
        }
        s.by_config.entry(vm.config.clone()).or_default().insert(vm.id.clone());
        s.by_host.insert(vm.hostname.clone(), vm.id.clone());
        if let Some(d) = vm.deadline() {
            s.deadlines.insert(vm.id.clone(), d);
        }
        let version = cur.map_or(1, |c| c.version + 1);
        let old = s.counted.remove(&vm.id);
        if let Some(old) = &old {
            s.count(&vm.config, old, -1);
        }
        let new = (vm.counted(), vm.place());
        s.count(&vm.config, &new, 1);
        s.counted.insert(vm.id.clone(), new);
        s.vms.insert(vm.id.clone(), Versioned { value: vm.clone(), version });
        s.corrupt_vms.remove(&vm.id);
        Ok(true)
    }

    async fn delete_vm_spending(&self, id: &str, version: u64, spend: &Spend) -> Result<bool, StoreError> {
        let mut s = self.lock();
        let Some(cur) = s.vms.get(id).cloned().filter(|v| v.version == version) else { return Ok(false) };
        s.spend(&cur.value.config, spend);
        s.unindex(&cur.value);
        s.bots.remove(&cur.value.hostname);
        if let Some(old) = s.counted.remove(id) {
            s.count(&cur.value.config, &old, -1);
        }
        s.vms.remove(id);
        s.corrupt_vms.remove(id);
        Ok(true)
    }

    async fn vm_ids(&self, index: VmIndex) -> Result<Vec<String>, StoreError> {
        self.lock().vm_ids(index)
    }

    async fn vms_by_hostname(&self, hostnames: &[String]) -> Result<Vec<Option<String>>, StoreError> {
        let s = self.lock();
        s.healing("vm:host")?;
        Ok(hostnames.iter().map(|h| s.by_host.get(h).cloned()).collect())
    }

    async fn vm_configs(&self) -> Result<Vec<String>, StoreError> {
        let s = self.lock();
        s.healing("vm:cfgs")?;
        Ok(s.by_config.iter().filter(|(_, v)| !v.is_empty()).map(|(k, _)| k.clone()).collect())
    }

    async fn put_bots(&self, bots: &[Observed]) -> Result<(), StoreError> {
        let mut s = self.lock();
        for b in bots {
            s.bots.insert(b.bot.id.clone(), b.clone());
        }
        Ok(())
    }

    async fn bot(&self, hostname: &str) -> Result<Option<Observed>, StoreError> {
        Ok(self.lock().bots.get(hostname).cloned())
    }

    async fn observed(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.lock().bots.keys().cloned().collect())
    }

    async fn forget_bots(&self, hostnames: &[String]) -> Result<(), StoreError> {
        let mut s = self.lock();
        for h in hostnames {
            s.bots.remove(h);
        }
        Ok(())
    }

    async fn push_error(&self, prefix: &str, e: &ErrorEntry) -> Result<(), StoreError> {
        let mut s = self.lock();
        push_capped(s.errors.entry(prefix.to_owned()).or_default(), e.clone(), KEEP_ERRORS);
        Ok(())
    }

    async fn errors(&self, prefix: &str) -> Result<Vec<ErrorEntry>, StoreError> {
        Ok(self.lock().errors.get(prefix).cloned().unwrap_or_default())
    }

    async fn resolve_errors(
        &self,
        prefix: &str,
        stages: &[&str],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        if let Some(list) = self.lock().errors.get_mut(prefix) {
            for e in list.iter_mut().filter(|e| stages.contains(&e.stage.as_str()) && e.resolved.is_none()) {
                e.resolved = Some(now);
            }
        }
        Ok(())
    }

    async fn bump(&self, prefix: &str, what: &str) -> Result<(), StoreError> {
        *self.lock().counters.entry((prefix.to_owned(), what.to_owned())).or_default() += 1;
        Ok(())
    }

    async fn counter(&self, prefix: &str, what: &str) -> Result<u64, StoreError> {
        Ok(self.lock().counters.get(&(prefix.to_owned(), what.to_owned())).copied().unwrap_or(0))
    }

    async fn push_audit(&self, e: &AuditEntry, keep: usize) -> Result<(), StoreError> {
        let mut s = self.lock();
        push_capped(s.audit.entry(e.prefix.clone()).or_default(), e.clone(), keep);
        Ok(())
    }

    async fn audit(&self, prefix: &str, offset: usize, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let s = self.lock();
        let list = s.audit.get(prefix).map_or(&[][..], Vec::as_slice);
        Ok(list.iter().skip(offset).take(limit).cloned().collect())
    }

    async fn set_file_errors(&self, errors: &[FileError]) -> Result<(), StoreError> {
        self.lock().file_errors = errors.to_vec();
        Ok(())
    }

    async fn file_errors(&self) -> Result<Vec<FileError>, StoreError> {
        Ok(self.lock().file_errors.clone())
    }

    async fn ledger(&self, prefix: &str) -> Result<BTreeMap<String, i64>, StoreError> {
        Ok(self.lock().ledgers.get(prefix).cloned().unwrap_or_default())
    }

    async fn ledger_configs(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.lock().ledgers.keys().cloned().collect())
    }

    async fn put_price_book(&self, book: &crate::prices::book::PriceBook) -> Result<(), StoreError> {
        self.write_price_book(book)
    }

    async fn price_book(&self) -> Result<Option<crate::prices::book::PriceBook>, StoreError> {
        Ok(self.read_price_book())
    }

    async fn put_counts(&self, prefix: &str, counts: &Counts) -> Result<(), StoreError> {
        self.lock().counts.insert(prefix.to_owned(), counts.clone());
        Ok(())
    }

    async fn counts(&self, prefix: &str) -> Result<Option<Counts>, StoreError> {
        Ok(self.lock().counts.get(prefix).cloned())
    }

    async fn sums(&self, prefix: &str) -> Result<Option<Sums>, StoreError> {
        let s = self.lock();
        s.healing(&format!("sums:{prefix}"))?;
        Ok(s.sums.get(prefix).filter(|(_, complete)| *complete).map(|(s, _)| *s))
    }

    async fn count_in(&self, vm: &Versioned<Vm>) -> Result<(), StoreError> {
        let mut s = self.lock();
        let current = s.vms.get(&vm.value.id).is_some_and(|v| v.version == vm.version);
        if !current || s.counted.contains_key(&vm.value.id) {
            return Ok(());
        }
        let new = (vm.value.counted(), vm.value.place());
        s.count(&vm.value.config, &new, 1);
        s.counted.insert(vm.value.id.clone(), new);
        Ok(())
    }

    async fn zone_sums(&self, prefix: &str) -> Result<Option<(Sums, BTreeMap<String, Sums>)>, StoreError> {
        let s = self.lock();
        s.healing(&format!("sums:{prefix}"))?;
        let Some((totals, true)) = s.sums.get(prefix) else { return Ok(None) };
        Ok(Some((*totals, s.zone_sums.get(prefix).cloned().unwrap_or_default())))
    }

    async fn recount_zones(&self, prefix: &str) -> Result<(), StoreError> {
        // Kept with every write here, as in Redis: counting again gives the same sums.
        let mut s = self.lock();
        let mut zones: BTreeMap<String, Sums> = BTreeMap::new();
        for id in s.by_config.get(prefix).into_iter().flatten() {
            if let Some((bits, zone)) = s.counted.get(id) {
                add(zones.entry(zone.clone()).or_insert([0; SUMS]), *bits, 1);
            }
        }
        s.zone_sums.insert(prefix.to_owned(), zones);
        Ok(())
    }

    async fn sums_complete(&self, prefix: &str) -> Result<(), StoreError> {
        self.lock().sums.entry(prefix.to_owned()).or_insert(([0; SUMS], false)).1 = true;
        Ok(())
    }

    async fn drop_status(&self, prefix: &str) -> Result<(), StoreError> {
        let mut s = self.lock();
        s.counts.remove(prefix);
        s.sums.remove(prefix);
        s.zone_sums.remove(prefix);
        s.errors.remove(prefix);
        s.counters.retain(|(p, _), _| p != prefix);
        s.series.remove(&Series::Config(prefix.to_owned()).key());
        Ok(())
    }

    async fn put_sample(&self, series: &Series, sample: &Sample) -> Result<(), StoreError> {
        self.lock().put_sample(series, sample);
        Ok(())
    }

    async fn samples(&self, series: &Series) -> Result<Vec<Sample>, StoreError> {
        Ok(self.lock().samples(series))
    }

    async fn backoff(&self, project: &str, zone: &str) -> Result<Option<Backoff>, StoreError> {
        Ok(self.lock().backoffs.get(&(project.to_owned(), zone.to_owned())).cloned())
    }

    async fn set_backoff(&self, project: &str, zone: &str, b: Option<&Backoff>) -> Result<(), StoreError> {
        let mut s = self.lock();
        let key = (project.to_owned(), zone.to_owned());
        match b {
            Some(b) => s.backoffs.insert(key, b.clone()),
            None => s.backoffs.remove(&key),
        };
        Ok(())
    }

    async fn claim(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut s = self.lock();
        let now = Instant::now();
        s.claims.retain(|_, (_, until)| *until > now);
        if s.claims.contains_key(key) {
            return Ok(false);
        }
        s.claims.insert(key.to_owned(), (String::new(), now + ttl));
        Ok(true)
    }

    async fn lease(&self, key: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut s = self.lock();
        let now = Instant::now();
        s.claims.retain(|_, (_, until)| *until > now);
        match s.claims.get(key) {
            Some((h, _)) if h != holder => Ok(false),
            _ => {
                s.claims.insert(key.to_owned(), (holder.to_owned(), now + ttl));
                Ok(true)
            }
        }
    }

    async fn renew(&self, key: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut s = self.lock();
        let held = s.holds_lease(key, holder);
        if held {
            s.claims.insert(key.to_owned(), (holder.to_owned(), Instant::now() + ttl));
        }
        Ok(held)
    }

    async fn release(&self, key: &str, holder: &str) -> Result<(), StoreError> {
        let mut s = self.lock();
        if s.claims.get(key).is_some_and(|(h, _)| h == holder) {
            s.claims.remove(key);
        }
        Ok(())
    }

    async fn mark(&self, space: &str, key: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, StoreError> {
        Ok(*self.lock().marks.entry(space.to_owned()).or_default().entry(key.to_owned()).or_insert(now))
    }

    async fn unmark(&self, space: &str, key: &str) -> Result<(), StoreError> {
        if let Some(m) = self.lock().marks.get_mut(space) {
            m.remove(key);
        }
        Ok(())
    }

    async fn marks(&self, space: &str) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        Ok(self
            .lock()
            .marks
            .get(space)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default())
    }

    async fn global_pause(&self) -> Result<Option<Pause>, StoreError> {
        let s = self.lock();
        if s.corrupt_pause {
            return Err(StoreError::corrupt("pause", "expected value at line 1 column 2"));
        }
        Ok(s.pause.clone())
    }

    async fn set_global_pause(&self, pause: Option<&Pause>) -> Result<(), StoreError> {
        let mut s = self.lock();
        s.pause = pause.cloned();
        s.corrupt_pause = false;
        Ok(())
    }

    async fn heal_requests(&self) -> Result<Vec<Scope>, StoreError> {
        Ok(self.lock().heal_scopes())
    }

    async fn derived_sound(&self, prefix: &str) -> Result<bool, StoreError> {
        let s = self.lock();
        Ok(s.healing(&format!("vm:cfg:{prefix}")).and(s.healing(&format!("sums:{prefix}"))).is_ok())
    }

    async fn rebuild(&self, scope: &Scope) -> Result<Rebuilt, StoreError> {
        Ok(self.lock().rebuild(scope))
    }
}
