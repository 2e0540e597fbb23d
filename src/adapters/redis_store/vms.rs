//! A VM's compare-and-set write and delete in layout 1 (`PUT_VM`, `DELETE_VM`), each with its
//! part of its Config's ledger (`ledger:<prefix>`, a HASH of integers: `model::spend`) in the
//! same script; and the ledgers read back, with the set of Configs that have one
//! (`ledger:cfgs`, kept after a Config is deleted, for showback).

use std::collections::BTreeMap;

use gce_backend_jobs::model::ledger::Spend;
use gce_backend_jobs::model::{SUMS, Vm};
use gce_backend_jobs::ports::store::{Expect, StoreError};
use redis::AsyncCommands;

use super::RedisStore;
use super::conn::{err, expect, json};
use super::layout::Layout as L;
use super::sums::zoned;

/// The ledger's part of a VM script's call: its field/amount pairs, after the script's own.
pub(super) fn spend_args(inv: &mut redis::ScriptInvocation<'_>, spend: &Spend) {
    for (k, v) in spend.pairs() {
        inv.arg(k).arg(v);
    }
}

impl RedisStore {
    /// Lists `prefix` among the Configs with a ledger, before a write that changes it.
    pub(super) async fn list_ledger(&self, prefix: &str, spend: &Spend) -> Result<(), StoreError> {
        if spend.is_empty() {
            return Ok(());
        }
        self.c().sadd(self.k("ledger:cfgs"), prefix).await.map_err(err)
    }

    /// `Store::put_vm_spending` in layout 1.
    pub(super) async fn v1_put_vm(&self, vm: &Vm, e: Expect, spend: &Spend) -> Result<bool, StoreError> {
        let keys = self.vm_keys(&vm.config);
        let ledger = self.owned(L::One, &vm.config, "ledger");
        let mut inv = self.put[2].prepare_invoke();
        // Every key but the bot observations, the ledger before layout and heal.
        for k in keys[..7].iter().chain(&keys[8..13]).chain([&ledger]).chain(&keys[13..]) {
            inv.key(k);
        }
        inv.arg(&vm.id).arg(expect(e)).arg(json(vm)?).arg(&vm.hostname);
        inv.arg(if vm.instance.is_none() { "0" } else { "1" }).arg(&vm.config);
        inv.arg(vm.counted()).arg(SUMS);
        inv.arg(vm.deadline().map_or(String::new(), |d| d.timestamp_millis().to_string()));
        inv.arg(zoned(vm));
        spend_args(&mut inv, spend);
        let v: u64 = self.v1_write(inv.invoke_async(&mut self.c()).await).await?;
        Ok(v > 0)
    }

    /// `Store::delete_vm_spending` in layout 1.
    pub(super) async fn v1_delete_vm(
        &self,
        (id, config, hostname): (&str, &str, &str),
        version: u64,
        spend: &Spend,
    ) -> Result<bool, StoreError> {
        let keys = self.vm_keys(config);
        let ledger = self.owned(L::One, config, "ledger");
        let mut inv = self.put[3].prepare_invoke();
        for k in keys[..13].iter().chain([&ledger]).chain(&keys[13..]) {
            inv.key(k);
        }
        inv.arg(id).arg(version).arg(hostname).arg(config).arg(SUMS);
        spend_args(&mut inv, spend);
        let n: u64 = self.v1_write(inv.invoke_async(&mut self.c()).await).await?;
        Ok(n > 0)
    }

    /// `Store::ledger`: the fields that read as integers (another's are left out).
    pub(super) async fn read_ledger(&self, prefix: &str) -> Result<BTreeMap<String, i64>, StoreError> {
        let key = self.owned(self.layout().await?, prefix, "ledger");
        let raw: BTreeMap<String, String> = match self.c().hgetall(&key).await {
            Ok(raw) => raw,
            // Of another type (written by hand): no ledger to read.
            Err(e) if e.code() == Some("WRONGTYPE") => return Ok(BTreeMap::new()),
            Err(e) => return Err(err(e)),
        };
        Ok(raw.into_iter().filter_map(|(k, v)| Some((k, v.parse().ok()?))).collect())
    }

    /// `Store::ledger_configs`.
    pub(super) async fn ledger_configs_listed(&self) -> Result<Vec<String>, StoreError> {
        let mut all: Vec<String> = match self.c().smembers(self.k("ledger:cfgs")).await {
            Ok(all) => all,
            Err(e) if e.code() == Some("WRONGTYPE") => Vec::new(),
            Err(e) => return Err(err(e)),
        };
        all.sort();
        Ok(all)
    }
}
