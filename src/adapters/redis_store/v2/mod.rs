//! The VM operations of layout 2 (see `layout.rs`): a Config's VMs, indexes and sums under its
//! own tag `{<ns>:c:<prefix>}`, so every script touches one Config's slot.
//!
//! | key (under the Config's tag) | type | holds |
//! |---|---|---|
//! | `vm` | HASH | VM id → VM (JSON); `<id>#v` → its version and state (`scripts.rs`) |
//! | `uncreated`, `created` | SET | its VMs without / with an instance |
//! | `host` | HASH | hostname → VM id |
//! | `deadline` | ZSET | VM id → its instance's deadline (ms) |
//! | `sums` | HASH | `<place>/i`: VMs counting bit `i` in each place (zone, `zone#rank`); totals are their sum |
//! | `bots` | HASH | hostname → last bot observation |
//! | `heal` | SET | set while the Config's derived keys need a rebuild |
//! | `err`, `audit` | LIST | its last errors; its audit trail |
//! | `counters` | HASH | dead_tasks, task_failures |
//! | `series:cfg` | ZSET | its dashboard samples |
//!
//! Under `{<ns>:db}` stay the Config registry (`cfg`, `cfg:ver`), `vm:cfgs` (every prefix that
//! may have VMs: added before a Config's first VM write, so a crash between the two leaves a
//! prefix without VMs, which readers skip, never a VM no listing finds), counts, backoffs, file
//! errors, claims and leases, marks, the global audit list, queue series, the shared `bots` hash
//! (observations of hostnames of no VM's shape), `paused` (the global pause) and `buckets` (the
//! list of rate-limit buckets); each bucket, and its places, is under its project's own tag,
//! `{<ns>:b:<project>}` (`buckets.rs`). A read across Configs reads each Config's key.

use std::collections::{BTreeMap, HashMap};

use gce_backend_jobs::model::ledger::Spend;
use gce_backend_jobs::model::{SUMS, Sums, Undecoded, Vm};
use gce_backend_jobs::naming::parse_id;
use gce_backend_jobs::ports::store::{Expect, StoreError, Versioned, VmIndex};
use redis::AsyncCommands;

use super::RedisStore;
use super::conn::{err, expect, json};
use super::sums::zoned;
use super::vms::spend_args;

mod heal;
pub(super) mod scripts;

/// The parts of a Config's VM keys, in the order of the scripts' KEYS.
pub(super) const VM_PARTS: [&str; 8] =
    ["vm", "uncreated", "created", "host", "deadline", "sums", "bots", "heal"];

/// The state of a VM as the scripts keep it (see `scripts.rs`): made, deadline, zoned, hostname.
pub(super) fn state_of(vm: &Vm) -> String {
    let made = if vm.instance.is_some() { "1" } else { "0" };
    let dl = vm.deadline().map_or(String::new(), |d| d.timestamp_millis().to_string());
    format!("{made}|{dl}|{}|{}", zoned(vm), vm.hostname)
}

/// The version in a `<id>#v` field.
fn version_in(raw: &str) -> Option<u64> {
    let digits: &str = raw.split('|').next().unwrap_or("");
    digits.parse().ok()
}

/// The Config a VM id belongs to.
fn prefix_of(id: &str) -> &str {
    parse_id(id).map_or(id, |(p, _)| p)
}

impl RedisStore {
    /// Config `prefix`'s VM keys, in the order of the scripts' KEYS.
    pub(super) fn v2_keys(&self, prefix: &str) -> Vec<String> {
        VM_PARTS.iter().map(|p| self.kc(prefix, p)).collect()
    }

    /// The keys of a VM's write and delete: [`VM_PARTS`] with the Config's ledger before heal.
    fn v2_vm_keys(&self, prefix: &str) -> Vec<String> {
        let mut keys = self.v2_keys(prefix);
        keys.insert(keys.len() - 1, self.kc(prefix, "ledger"));
        keys
    }

    /// `Store::vm` in layout 2.
    pub(super) async fn v2_vm(&self, id: &str) -> Result<Option<Versioned<Vm>>, StoreError> {
        let (raw, ver): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(self.kc(prefix_of(id), "vm"))
            .arg(id)
            .arg(format!("{id}#v"))
            .query_async(&mut self.c())
            .await
            .map_err(err)?;
        let Some(raw) = raw else { return Ok(None) };
        let version = ver.as_deref().and_then(version_in);
        match Vm::decode(&raw) {
            Ok(value) => Ok(version.map(|version| Versioned { value, version })),
            Err(Undecoded::Corrupt(e)) => {
                Err(StoreError::corrupt_at(format!("vm {id}"), e, version.unwrap_or(0)))
            }
            Err(Undecoded::Newer(format)) => Err(StoreError::Newer { key: format!("vm {id}"), format }),
        }
    }

    /// `Store::vm_version` in layout 2.
    pub(super) async fn v2_vm_version(&self, id: &str) -> Result<Option<u64>, StoreError> {
        let raw: Option<String> =
            self.c().hget(self.kc(prefix_of(id), "vm"), format!("{id}#v")).await.map_err(err)?;
        Ok(raw.as_deref().and_then(version_in))
    }

    /// Adds `prefix` to `vm:cfgs` unless this process did already.
    async fn list_config(&self, prefix: &str) -> Result<(), StoreError> {
        if self.listed.lock().await.contains(prefix) {
            return Ok(());
        }
        let _: () = self.c().sadd(self.k("vm:cfgs"), prefix).await.map_err(err)?;
        self.listed.lock().await.insert(prefix.to_owned());
        Ok(())
    }

    /// `Store::put_vm` in layout 2.
    pub(super) async fn v2_put_vm(&self, vm: &Vm, e: Expect, spend: &Spend) -> Result<bool, StoreError> {
        self.list_config(&vm.config).await?;
        let mut inv = self.put2[0].prepare_invoke();
        for k in self.v2_vm_keys(&vm.config) {
            inv.key(k);
        }
        let made = if vm.instance.is_none() { "0" } else { "1" };
        inv.arg(&vm.id).arg(expect(e)).arg(json(vm)?).arg(made).arg(SUMS);
        inv.arg(vm.deadline().map_or(String::new(), |d| d.timestamp_millis().to_string()));
        inv.arg(zoned(vm)).arg(&vm.hostname);
        spend_args(&mut inv, spend);
        let v: u64 = inv.invoke_async(&mut self.c()).await.map_err(err)?;
        Ok(v > 0)
    }

    /// `Store::delete_vm` in layout 2 (`hostname`: '' for a record that does not decode).
    pub(super) async fn v2_delete_vm(
        &self,
        id: &str,
        version: u64,
        hostname: &str,
        spend: &Spend,
    ) -> Result<bool, StoreError> {
        let mut inv = self.put2[1].prepare_invoke();
        for k in self.v2_vm_keys(prefix_of(id)) {
            inv.key(k);
        }
        inv.arg(id).arg(version).arg(hostname).arg(SUMS);
        spend_args(&mut inv, spend);
        let n: u64 = inv.invoke_async(&mut self.c()).await.map_err(err)?;
        Ok(n > 0)
    }

    /// Every prefix listed in `vm:cfgs`.
    pub(super) async fn listed_configs(&self) -> Result<Vec<String>, StoreError> {
        let mut all: Vec<String> = self.c().smembers(self.k("vm:cfgs")).await.map_err(err)?;
        all.sort();
        Ok(all)
    }

    /// `Store::vm_configs` in layout 2: the listed prefixes that have VMs.
    pub(super) async fn v2_vm_configs(&self) -> Result<Vec<String>, StoreError> {
        let listed = self.listed_configs().await?;
        if listed.is_empty() {
            return Ok(listed);
        }
        let cmds: Vec<redis::Cmd> = listed.iter().map(|p| redis::Cmd::hlen(self.kc(p, "vm"))).collect();
        let sizes: Vec<u64> = self.each(&cmds).await.map_err(err)?;
        Ok(listed.into_iter().zip(sizes).filter(|(_, n)| *n > 0).map(|(p, _)| p).collect())
    }

    /// `Store::vm_ids` in layout 2.
    pub(super) async fn v2_vm_ids(&self, index: VmIndex) -> Result<Vec<String>, StoreError> {
        let (prefixes, part) = match &index {
            VmIndex::OfConfig(p) => (vec![p.clone()], None),
            VmIndex::UncreatedOf(p) => (vec![p.clone()], Some("uncreated")),
            VmIndex::Uncreated => (self.listed_configs().await?, Some("uncreated")),
            VmIndex::Created => (self.listed_configs().await?, Some("created")),
            VmIndex::DueBy(_) => (self.listed_configs().await?, Some("deadline")),
        };
        if prefixes.is_empty() {
            return Ok(Vec::new());
        }
        let cmds: Vec<redis::Cmd> = prefixes
            .iter()
            .map(|p| match (&index, part) {
                (VmIndex::DueBy(t), _) => {
                    let mut c = redis::cmd("ZRANGEBYSCORE");
                    c.arg(self.kc(p, "deadline")).arg("-inf").arg(t.timestamp_millis());
                    c
                }
                (_, Some(part)) => redis::Cmd::smembers(self.kc(p, part)),
                (_, None) => redis::Cmd::sunion(&[self.kc(p, "uncreated"), self.kc(p, "created")]),
            })
            .collect();
        let read: Result<Vec<Vec<String>>, _> = self.each(&cmds).await;
        match read {
            Ok(lists) => {
                let mut ids: Vec<String> = lists.into_iter().flatten().collect();
                if !matches!(index, VmIndex::DueBy(_)) {
                    ids.sort();
                }
                Ok(ids)
            }
            Err(e) if e.code() == Some("WRONGTYPE") => {
                // Which Config's key is not known from the answer: each is checked by its rebuild.
                let cmds: Vec<redis::Cmd> =
                    prefixes.iter().map(|p| redis::Cmd::sadd(self.kc(p, "heal"), "cfg")).collect();
                let flagged: Result<Vec<i64>, _> = self.each(&cmds).await;
                if let Err(e) = flagged {
                    tracing::debug!(error = %e, "could not flag the Configs' keys for a rebuild");
                }
                Err(StoreError::Healing { key: format!("vm:{}", part.unwrap_or("cfg")) })
            }
            Err(e) => Err(err(e)),
        }
    }

    /// `Store::vms_by_hostname` in layout 2: each name asked of its Config's index.
    pub(super) async fn v2_vms_by_hostname(
        &self,
        hostnames: &[String],
    ) -> Result<Vec<Option<String>>, StoreError> {
        let mut by: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, h) in hostnames.iter().enumerate() {
            if let Some(p) = super::layout::vm_prefix_of_host(h) {
                by.entry(p).or_default().push(i);
            }
        }
        let mut out = vec![None; hostnames.len()];
        if by.is_empty() {
            return Ok(out);
        }
        let cmds: Vec<redis::Cmd> = by
            .iter()
            .map(|(p, at)| {
                let mut c = redis::cmd("HMGET");
                c.arg(self.kc(p, "host")).arg(at.iter().map(|&i| &hostnames[i]).collect::<Vec<_>>());
                c
            })
            .collect();
        let read: Vec<Vec<Option<String>>> = match self.each(&cmds).await {
            Ok(r) => r,
            Err(e) if e.code() == Some("WRONGTYPE") => {
                return Err(StoreError::Healing { key: "vm:host".to_owned() });
            }
            Err(e) => return Err(err(e)),
        };
        for ((_, at), ids) in by.iter().zip(read) {
            for (&i, id) in at.iter().zip(ids) {
                out[i] = id;
            }
        }
        Ok(out)
    }

    /// `Store::zone_sums` in layout 2: totals are the sums of the places'.
    pub(super) async fn v2_zone_sums(
        &self,
        prefix: &str,
    ) -> Result<Option<(Sums, BTreeMap<String, Sums>)>, StoreError> {
        let raw: HashMap<String, i64> = match self.c().hgetall(self.kc(prefix, "sums")).await {
            Ok(raw) => raw,
            Err(e) if e.code() == Some("WRONGTYPE") => {
                let _: Result<(), _> = self.c().sadd(self.kc(prefix, "heal"), "cfg").await;
                return Err(StoreError::Healing { key: format!("sums:{prefix}") });
            }
            Err(e) => return Err(err(e)),
        };
        let mut totals = [0; SUMS];
        let mut zones: BTreeMap<String, Sums> = BTreeMap::new();
        for (field, v) in raw {
            let Some((zone, i)) = field.rsplit_once('/') else { continue };
            let Ok(i @ 0..SUMS) = i.parse::<usize>() else { continue };
            zones.entry(zone.to_owned()).or_insert([0; SUMS])[i] = v;
            totals[i] += v;
        }
        Ok(Some((totals, zones)))
    }
}

#[cfg(test)]
mod tests;
