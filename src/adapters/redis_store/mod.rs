//! `Store` on Redis, in either key layout (`layout.rs`): layout 1 keeps every key of a deployment
//! under the hash tag `{<ns>:db}` (one Cluster slot), as below; layout 2 moves what a Config owns
//! under the Config's own tag (`v2/mod.rs`). Each method asks the layout it acts in.
//!
//! Layout 1:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `cfg`, `cfg:ver` | HASH | prefix → Config record (JSON), its version |
//! | `vm`, `vm:ver` | HASH | VM id → VM (JSON), its version |
//! | `vm:uncreated`, `vm:created` | SET | VM ids without / with an instance |
//! | `vm:cfg:<prefix>`, `vm:cfgs` | SET | VM ids of a Config; prefixes with VMs |
//! | `vm:host` | HASH | hostname → VM id |
//! | `vm:deadline` | ZSET | VM id → its instance's deadline (ms), for VMs with an instance |
//! | `bots` | HASH | hostname → last bot observation |
//! | `err:<prefix>` | LIST | the Config's last 20 errors, newest first |
//! | `audit:<prefix>`, `audit` | LIST | a Config's audit trail, and the global one, newest first (`limits.audit_keep` each; kept after the Config is deleted) |
//! | `counts`, `backoff` | HASH | prefix → counts; `project/zone` → backoff |
//! | `vm:idx` | HASH | VM id → the version its last write made and what its indexes said of it then (see `PUT_VM`) |
//! | `vm:counted`, `vm:zoned` | HASH | VM id → what it adds to its Config's sums (bits of `Vm::counted`), and to its zone's (`bits@zone`) |
//! | `sums:<prefix>` | HASH | a Config's sums, field `i` per bit, `<zone>/i` per zone (`<zone>#<rank>/i` for a fallback rank); `complete` once they cover every VM |
//! | `counters:<prefix>` | HASH | a Config's counters: dead_tasks, task_failures |
//! | `files` | STRING | errors of Config files that hold no Config (JSON list) |
//! | `prices` | STRING | the price book: Compute Engine's SKUs, where and when read (JSON, `jobs/src/prices.rs`) |
//! | `claim:<key>` | STRING | a claimed cron tick, or the Config admission claim (expires) |
//! | `mark:<space>` | HASH | key → first-seen time |
//! | `pause` | STRING | the global pause (JSON), while set |
//! | `bucket:<project>/<class>`, `buckets` | HASH, SET | a rate-limit token bucket (expires after an hour unused); their names |
//! | `series:cfg:<prefix>`, `series:queue:<name>` | ZSET | the dashboard's samples (JSON), scored by their minute (ms); the last hour's |
//! | `ledger:<prefix>` | HASH | a Config's ledger of spend (`model::spend`), changed with its VMs' writes; kept after it is deleted |
//! | `ledger:cfgs` | SET | prefixes with a ledger |
//! | `heal` | SET | scopes whose derived keys need a rebuild (`cfg:<prefix>`, `*`: every one), see `safety/heal.rs` |

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use gce_backend_jobs::ports::store::{
    CorruptRecord, Expect, Fence, Rebuilt, Scope, Store, StoreError, Versioned, VmIndex,
};
use gce_backend_jobs::prices::book::PriceBook;
use gce_backend_jobs::{
    model::AuditEntry, model::Backoff, model::ConfigRecord, model::Counts, model::ErrorEntry,
    model::FileError, model::KEEP_ERRORS, model::Observed, model::Pause, model::Sample, model::Series,
    model::Sums, model::Undecoded, model::Vm, model::format, model::ledger::Spend,
};
use redis::AsyncCommands;

mod audit;
mod buckets;
mod conn;
mod heal;
mod keys;
mod layout;
mod marks;
mod migrate;
mod owned;
mod prices;
mod shared;
#[macro_use]
mod scripts;
mod series;
mod sums;
mod v2;
mod vms;
pub use conn::RedisStore;
use conn::{derived, err, json, lenient};
pub use layout::Layout;
use layout::Layout as L;
pub use migrate::{Migration, SETTLE};

/// Longest an operator's write waits for its replicas before the API answers 503.
const REPLICATION_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

#[async_trait]
impl Store for RedisStore {
    async fn config(&self, prefix: &str) -> Result<Option<Versioned<ConfigRecord>>, StoreError> {
        self.get("cfg", prefix, format::decode).await
    }

    async fn configs(&self) -> Result<Vec<Versioned<ConfigRecord>>, StoreError> {
        let (recs, vers) = self.raw_configs().await?;
        let mut out: Vec<Versioned<ConfigRecord>> = recs
            .into_iter()
            .filter_map(|(prefix, raw)| {
                // A newer build's record is left to it, and one that does not decode is listed
                // by `corrupt_configs`.
                let value: ConfigRecord = format::decode(&raw).ok()?;
                Some(Versioned { value, version: *vers.get(&prefix)? })
            })
            .collect();
        out.sort_by(|a, b| a.value.config.prefix.cmp(&b.value.config.prefix));
        Ok(out)
    }

    async fn corrupt_configs(&self) -> Result<Vec<CorruptRecord>, StoreError> {
        let (recs, vers) = self.raw_configs().await?;
        let mut out: Vec<CorruptRecord> = recs
            .into_iter()
            .filter_map(|(key, raw)| {
                let error = match format::decode::<ConfigRecord>(&raw) {
                    Err(Undecoded::Corrupt(e)) => e,
                    Ok(_) | Err(Undecoded::Newer(_)) => return None,
                };
                // No version key: version 0, which the compare-and-set scripts read as absent.
                Some(CorruptRecord { version: vers.get(&key).copied().unwrap_or(0), key, error })
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn put_config(&self, rec: &ConfigRecord, e: Expect) -> Result<bool, StoreError> {
        self.write_config(rec, e, None).await
    }

    async fn put_config_fenced(
        &self,
        rec: &ConfigRecord,
        e: Expect,
        fence: &Fence,
    ) -> Result<bool, StoreError> {
        self.write_config(rec, e, Some(fence)).await
    }

    async fn delete_config(&self, prefix: &str, version: u64) -> Result<bool, StoreError> {
        let n: u64 = self.put[1]
            .key(self.k("cfg"))
            .key(self.k("cfg:ver"))
            .arg(prefix)
            .arg(version)
            .invoke_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(n > 0)
    }

    async fn vm(&self, id: &str) -> Result<Option<Versioned<Vm>>, StoreError> {
        match self.layout().await? {
            L::Two => self.v2_vm(id).await,
            _ => self.get("vm", id, Vm::decode).await,
        }
    }

    async fn put_vm_spending(&self, vm: &Vm, e: Expect, spend: &Spend) -> Result<bool, StoreError> {
        let layout = self.writing().await?;
        self.list_ledger(&vm.config, spend).await?;
        if layout == L::Two {
            return self.v2_put_vm(vm, e, spend).await;
        }
        self.v1_put_vm(vm, e, spend).await
    }

    async fn vm_version(&self, id: &str) -> Result<Option<u64>, StoreError> {
        match self.layout().await? {
            L::Two => self.v2_vm_version(id).await,
            _ => self.c().hget(self.k("vm:ver"), id).await.map_err(err),
        }
    }

    async fn delete_vm_spending(&self, id: &str, version: u64, spend: &Spend) -> Result<bool, StoreError> {
        // A corrupt record still goes: its Config comes from its id, its hostname is unknown.
        let (config, hostname) = match self.vm(id).await {
            Ok(Some(cur)) => (cur.value.config, cur.value.hostname),
            Ok(None) => return Ok(false),
            Err(StoreError::Corrupt { .. }) => {
                let prefix = gce_backend_jobs::naming::parse_id(id).map_or(id, |(p, _)| p);
                (prefix.to_owned(), String::new())
            }
            Err(e) => return Err(e),
        };
        let layout = self.writing().await?;
        self.list_ledger(&config, spend).await?;
        if layout == L::Two {
            return self.v2_delete_vm(id, version, &hostname, spend).await;
        }
        self.v1_delete_vm((id, &config, &hostname), version, spend).await
    }

    async fn ledger(&self, prefix: &str) -> Result<BTreeMap<String, i64>, StoreError> {
        self.read_ledger(prefix).await
    }

    async fn ledger_configs(&self) -> Result<Vec<String>, StoreError> {
        self.ledger_configs_listed().await
    }

    async fn vm_ids(&self, index: VmIndex) -> Result<Vec<String>, StoreError> {
        if self.layout().await? == L::Two {
            return self.v2_vm_ids(index).await;
        }
        let part = match index {
            VmIndex::Uncreated => "vm:uncreated".to_owned(),
            VmIndex::Created => "vm:created".to_owned(),
            VmIndex::OfConfig(p) => format!("vm:cfg:{p}"),
            VmIndex::UncreatedOf(p) => {
                let part = format!("vm:cfg:{p}");
                let read: Result<Vec<String>, _> =
                    self.c().sinter(&[self.k("vm:uncreated"), self.k(&part)]).await;
                return match read {
                    Ok(mut ids) => {
                        ids.sort();
                        Ok(ids)
                    }
                    Err(e) => Err(derived(self, "vm:uncreated", e).await),
                };
            }
            VmIndex::DueBy(t) => {
                let read: Result<Vec<String>, _> = redis::cmd("ZRANGEBYSCORE")
                    .arg(self.k("vm:deadline"))
                    .arg("-inf")
                    .arg(t.timestamp_millis())
                    .query_async(&mut self.c())
                    .await;
                return match read {
                    Ok(ids) => Ok(ids),
                    Err(e) => Err(derived(self, "vm:deadline", e).await),
                };
            }
        };
        let read: Result<Vec<String>, _> = self.c().smembers(self.k(&part)).await;
        match read {
            Ok(mut ids) => {
                ids.sort();
                Ok(ids)
            }
            Err(e) => Err(derived(self, &part, e).await),
        }
    }

    async fn vms_by_hostname(&self, hostnames: &[String]) -> Result<Vec<Option<String>>, StoreError> {
        if hostnames.is_empty() {
            return Ok(Vec::new());
        }
        if self.layout().await? == L::Two {
            return self.v2_vms_by_hostname(hostnames).await;
        }
        let read = redis::cmd("HMGET").arg(self.k("vm:host")).arg(hostnames).query_async(&mut self.c()).await;
        match read {
            Ok(ids) => Ok(ids),
            Err(e) => Err(derived(self, "vm:host", e).await),
        }
    }

    async fn vm_configs(&self) -> Result<Vec<String>, StoreError> {
        if self.layout().await? == L::Two {
            return self.v2_vm_configs().await;
        }
        match self.c().smembers(self.k("vm:cfgs")).await {
            Ok(p) => Ok(p),
            Err(e) => Err(derived(self, "vm:cfgs", e).await),
        }
    }

    async fn put_bots(&self, bots: &[Observed]) -> Result<(), StoreError> {
        self.write_bots(bots).await
    }

    async fn bot(&self, hostname: &str) -> Result<Option<Observed>, StoreError> {
        Ok(self.read_bots(std::slice::from_ref(&hostname.to_owned())).await?.pop().flatten())
    }

    async fn bots(&self, hostnames: &[String]) -> Result<Vec<Option<Observed>>, StoreError> {
        self.read_bots(hostnames).await
    }

    async fn observed(&self) -> Result<Vec<String>, StoreError> {
        self.observed_hosts().await
    }

    async fn forget_bots(&self, hostnames: &[String]) -> Result<(), StoreError> {
        self.drop_bots(hostnames).await
    }

    async fn push_error(&self, prefix: &str, e: &ErrorEntry) -> Result<(), StoreError> {
        let key = self.owned(self.writing().await?, prefix, "err");
        self.push_capped(&key, json(e)?, KEEP_ERRORS).await
    }

    async fn errors(&self, prefix: &str) -> Result<Vec<ErrorEntry>, StoreError> {
        let key = self.owned(self.layout().await?, prefix, "err");
        let raw: Vec<String> = self.c().lrange(key, 0, -1).await.map_err(err)?;
        // A corrupt entry is left out rather than hiding the others.
        Ok(raw.iter().filter_map(|r| serde_json::from_str(r).ok()).collect())
    }

    async fn push_audit(&self, e: &AuditEntry, keep: usize) -> Result<(), StoreError> {
        self.push_audit_entry(e, keep).await
    }

    async fn audit(&self, prefix: &str, offset: usize, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.audit_entries(prefix, offset, limit).await
    }

    async fn resolve_errors(
        &self,
        prefix: &str,
        stages: &[&str],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let _: i64 = self.put[4]
            .key(self.owned(self.writing().await?, prefix, "err"))
            .arg(now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
            .arg(stages)
            .invoke_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(())
    }

    async fn bump(&self, prefix: &str, what: &str) -> Result<(), StoreError> {
        self.c().hincr(self.owned(self.writing().await?, prefix, "counters"), what, 1).await.map_err(err)
    }

    async fn counter(&self, prefix: &str, what: &str) -> Result<u64, StoreError> {
        let key = self.owned(self.layout().await?, prefix, "counters");
        let n: Option<u64> = self.c().hget(key, what).await.map_err(err)?;
        Ok(n.unwrap_or(0))
    }

    async fn set_file_errors(&self, errors: &[FileError]) -> Result<(), StoreError> {
        self.c().set(self.k("files"), json(&errors)?).await.map_err(err)
    }

    async fn file_errors(&self) -> Result<Vec<FileError>, StoreError> {
        let raw: Option<String> = self.c().get(self.k("files")).await.map_err(err)?;
        Ok(raw.and_then(|r| lenient("files", &r)).unwrap_or_default())
    }

    async fn put_price_book(&self, book: &PriceBook) -> Result<(), StoreError> {
        self.write_price_book(book).await
    }

    async fn price_book(&self) -> Result<Option<PriceBook>, StoreError> {
        self.read_price_book().await
    }

    async fn put_counts(&self, prefix: &str, counts: &Counts) -> Result<(), StoreError> {
        self.c().hset(self.k("counts"), prefix, json(counts)?).await.map_err(err)
    }

    async fn counts(&self, prefix: &str) -> Result<Option<Counts>, StoreError> {
        let raw: Option<String> = self.c().hget(self.k("counts"), prefix).await.map_err(err)?;
        Ok(raw.and_then(|r| lenient(&format!("counts {prefix}"), &r)))
    }

    async fn sums(&self, prefix: &str) -> Result<Option<Sums>, StoreError> {
        Ok(self.zone_sums(prefix).await?.map(|(totals, _)| totals))
    }

    async fn count_in(&self, vm: &Versioned<Vm>) -> Result<(), StoreError> {
        if self.writing().await? == L::Two {
            return Ok(()); // (every VM is counted from its first write on)
        }
        self.count_in_v1(vm).await
    }

    async fn zone_sums(&self, prefix: &str) -> Result<Option<(Sums, BTreeMap<String, Sums>)>, StoreError> {
        match self.layout().await? {
            L::Two => self.v2_zone_sums(prefix).await,
            _ => self.read_zone_sums(prefix).await,
        }
    }

    async fn recount_zones(&self, prefix: &str) -> Result<(), StoreError> {
        if self.writing().await? == L::Two {
            return self.v2_rebuild_config(prefix, &mut Rebuilt::default()).await;
        }
        self.recount_zones_v1(prefix).await
    }

    async fn sums_complete(&self, prefix: &str) -> Result<(), StoreError> {
        if self.writing().await? == L::Two {
            return Ok(()); // (always complete)
        }
        self.c().hset(self.k(&format!("sums:{prefix}")), "complete", 1).await.map_err(err)
    }

    async fn drop_status(&self, prefix: &str) -> Result<(), StoreError> {
        self.drop_owned(prefix).await
    }

    async fn put_sample(&self, series: &Series, sample: &Sample) -> Result<(), StoreError> {
        self.write_sample(series, sample).await
    }

    async fn samples(&self, series: &Series) -> Result<Vec<Sample>, StoreError> {
        self.read_samples(series).await
    }

    async fn backoff(&self, project: &str, zone: &str) -> Result<Option<Backoff>, StoreError> {
        Ok(self.backoffs(&[(project, zone)]).await?.pop().flatten())
    }

    async fn set_backoff(&self, project: &str, zone: &str, b: Option<&Backoff>) -> Result<(), StoreError> {
        self.write_backoff(project, zone, b).await
    }

    async fn backoffs(&self, scopes: &[(&str, &str)]) -> Result<Vec<Option<Backoff>>, StoreError> {
        self.read_backoffs(scopes).await
    }

    async fn clear_backoffs(&self, scopes: &[(&str, &str)]) -> Result<(), StoreError> {
        self.drop_backoffs(scopes).await
    }

    async fn claim(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        let set: Option<String> = redis::cmd("SET")
            .arg(self.k(&format!("claim:{key}")))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis().max(1) as u64)
            .query_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(set.is_some())
    }

    async fn lease(&self, key: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        self.lease_step(&scripts::LEASE, key, holder, ttl).await
    }

    async fn renew(&self, key: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        self.lease_step(&scripts::RENEW, key, holder, ttl).await
    }

    async fn release(&self, key: &str, holder: &str) -> Result<(), StoreError> {
        scripts::RELEASE
            .key(self.k(&format!("claim:{key}")))
            .arg(holder)
            .invoke_async(&mut self.c())
            .await
            .map_err(err)
    }

    async fn mark(&self, space: &str, key: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, StoreError> {
        self.mark_first(space, key, now).await
    }

    async fn unmark(&self, space: &str, key: &str) -> Result<(), StoreError> {
        self.c().hdel(self.mark_key(space), key).await.map_err(err)
    }

    async fn marks(&self, space: &str) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        self.marks_in(space).await
    }

    async fn marked(&self, space: &str, key: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.marked_at(space, key).await
    }

    async fn replicated(&self) -> Result<(), StoreError> {
        self.conn.replicated(REPLICATION_WAIT).await.map_err(StoreError::Unavailable)
    }

    async fn generation(&self) -> Result<Option<String>, StoreError> {
        let info: redis::Value =
            redis::cmd("INFO").arg("replication").query_async(&mut self.c()).await.map_err(err)?;
        Ok(Some(conn::replication_ids(&info)))
    }

    async fn global_pause(&self) -> Result<Option<Pause>, StoreError> {
        self.read_pause().await
    }

    async fn set_global_pause(&self, pause: Option<&Pause>) -> Result<(), StoreError> {
        self.write_pause(pause).await
    }

    async fn heal_requests(&self) -> Result<Vec<Scope>, StoreError> {
        match self.layout().await? {
            L::Two => self.v2_heal_scopes().await,
            _ => self.heal_scopes().await,
        }
    }

    async fn derived_sound(&self, prefix: &str) -> Result<bool, StoreError> {
        match self.layout().await? {
            L::Two => self.v2_sound(prefix).await,
            _ => self.sound(prefix).await,
        }
    }

    async fn rebuild(&self, scope: &Scope) -> Result<Rebuilt, StoreError> {
        match self.writing().await? {
            L::Two => self.v2_rebuild(scope).await,
            _ => self.rebuild_scope(scope).await,
        }
    }
}
