//! A Config's sums in Redis (`sums:<prefix>`, a HASH: field `i` per bit, `<zone>/i` per zone,
//! `complete` once they cover every VM), read as totals and per zone; and what a VM adds to its
//! zone's, as the scripts read it.

use std::collections::{BTreeMap, HashMap};

use gce_backend_jobs::model::{SUMS, Sums, Vm};
use gce_backend_jobs::ports::store::{StoreError, Versioned};
use redis::AsyncCommands;

use super::RedisStore;
use super::conn::{derived, err};

impl RedisStore {
    /// `Store::count_in` in layout 1 (`COUNT_IN`).
    pub(super) async fn count_in_v1(&self, vm: &Versioned<Vm>) -> Result<(), StoreError> {
        let v = &vm.value;
        let mut inv = self.put[5].prepare_invoke();
        inv.key(self.k("vm:ver")).key(self.k("vm:counted")).key(self.k(&format!("sums:{}", v.config)));
        inv.key(self.k("vm:zoned")).key(self.k("heal"));
        inv.arg(&v.id).arg(vm.version).arg(v.counted()).arg(SUMS).arg(zoned(v));
        inv.arg(format!("cfg:{}", v.config));
        let _: u64 = inv.invoke_async(&mut self.c()).await.map_err(err)?;
        Ok(())
    }

    /// `Store::recount_zones` in layout 1 (`RECOUNT_ZONES`).
    pub(super) async fn recount_zones_v1(&self, prefix: &str) -> Result<(), StoreError> {
        let keys = self.vm_keys(prefix);
        // vm, cfg set, counted, zoned, sums, idx, heal.
        let mut inv = self.put[6].prepare_invoke();
        for i in [0, 6, 8, 11, 9, 12, 14] {
            inv.key(&keys[i]);
        }
        inv.arg(SUMS).arg(format!("cfg:{prefix}"));
        let _: u64 = inv.invoke_async(&mut self.c()).await.map_err(err)?;
        Ok(())
    }

    /// `Store::zone_sums`: none until they are complete.
    pub(super) async fn read_zone_sums(
        &self,
        prefix: &str,
    ) -> Result<Option<(Sums, BTreeMap<String, Sums>)>, StoreError> {
        let part = format!("sums:{prefix}");
        let raw: HashMap<String, i64> = match self.c().hgetall(self.k(&part)).await {
            Ok(raw) => raw,
            Err(e) => return Err(derived(self, &part, e).await),
        };
        if !raw.contains_key("complete") {
            return Ok(None);
        }
        let mut totals = [0; SUMS];
        let mut zones: BTreeMap<String, Sums> = BTreeMap::new();
        for (field, v) in raw {
            let (zone, i) = match field.rsplit_once('/') {
                Some((zone, i)) => (Some(zone), i),
                None => (None, field.as_str()),
            };
            let Ok(i @ 0..SUMS) = i.parse::<usize>() else { continue };
            match zone {
                Some(z) => zones.entry(z.to_owned()).or_insert([0; SUMS])[i] = v,
                None => totals[i] = v,
            }
        }
        Ok(Some((totals, zones)))
    }
}

/// What a VM adds to its Config's zone sums, as the scripts read it: `bits@place` (its zone, with
/// `#<rank>` on a fallback rank: `Vm::place`; '' for a VM without one).
pub(super) fn zoned(vm: &Vm) -> String {
    format!("{}@{}", vm.counted(), vm.place())
}
