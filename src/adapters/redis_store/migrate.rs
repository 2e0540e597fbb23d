//! Moving a deployment's store from key layout 1 to layout 2 (`gce-backend recover migrate`):
//! counted first (a dry run writes nothing), then, with `apply`, in three steps, each safe to run
//! again after a crash:
//!
//! 1. `layout` := `migrating`, then a wait of [`SETTLE`], so every process of this build has read
//!    it: from then on their writes wait (the layout-1 record writes check it inside their
//!    scripts as well), their reads still see layout 1.
//! 2. Each Config's VM records and versions, bot observations, errors, audit trail, counters and
//!    samples are copied under its tag (what a previous, interrupted run copied is replaced) and
//!    its indexes and sums built from the records; the global pause moves to `paused`, layout 1's
//!    `pause` is left as [`MOVED`] (a release that knows only layout 1 reads it as a pause, so it
//!    stops making and removing machines), and `layout` := `2`.
//! 3. After another [`SETTLE`] (every process reads layout 2 by then), layout 1's keys are
//!    deleted: only those it copied.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use gce_backend_jobs::model::{AuditEntry, GLOBAL_AUDIT};
use gce_backend_jobs::naming::parse_id;
use gce_backend_jobs::ports::store::{Rebuilt, StoreError};
use redis::AsyncCommands;

use super::RedisStore;
use super::conn::err;
use super::layout::{LAYOUT_TTL, Layout};
use super::owned::MOVED;

/// How long a step waits for every process to have read the layout it set.
pub const SETTLE: Duration = Duration::from_millis(LAYOUT_TTL.as_millis() as u64 + 1000);

/// A Config's own keys of layout 1 copied as they are (`<part>:<prefix>` → the Config's `<part>`).
const OWNED: [&str; 5] = ["err", "audit", "counters", "series:cfg", "ledger"];

/// Layout 1's shared VM keys, deleted once the store is in layout 2.
const SHARED: [&str; 10] = [
    "vm",
    "vm:ver",
    "vm:uncreated",
    "vm:created",
    "vm:host",
    "vm:counted",
    "vm:zoned",
    "vm:idx",
    "vm:deadline",
    "heal",
];

/// What a migration found, and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Migration {
    /// The layout before (`1`, `migrating`, `2`).
    pub from: String,
    /// The layout after.
    pub to: String,
    /// Configs with something to move.
    pub configs: usize,
    /// VM records.
    pub vms: usize,
    /// Bot observations moved under their Config.
    pub bots: usize,
    /// A Config's lists and hashes (errors, audit, counters, samples, ledger).
    pub lists: usize,
    /// VM records whose id names no Config (`<prefix>-<index>`), kept in `{<ns>:db}:unplaced`.
    pub unplaced: usize,
    /// Layout 1's keys deleted.
    pub deleted: usize,
    /// Whether anything was written.
    pub applied: bool,
}

/// What layout 1 holds, by Config.
#[derive(Default)]
struct Found {
    vms: BTreeMap<String, Vec<String>>,
    unplaced: Vec<String>,
    bots: BTreeMap<String, Vec<String>>,
    prefixes: BTreeSet<String>,
}

impl RedisStore {
    /// Counts (`apply` false) or runs the move to layout 2; see the module's documentation.
    pub async fn migrate(&self, apply: bool, settle: Duration) -> Result<Migration, StoreError> {
        self.forget_layout().await;
        let from = self.layout().await?;
        let mut out = Migration { from: from.as_str().to_owned(), ..Default::default() };
        let found = self.found().await?;
        out.configs = found.prefixes.len();
        out.vms = found.vms.values().map(Vec::len).sum::<usize>() + found.unplaced.len();
        out.bots = found.bots.values().map(Vec::len).sum();
        out.unplaced = found.unplaced.len();
        if !apply {
            out.to = out.from.clone();
            return Ok(out);
        }
        out.applied = true;
        let mut found = found;
        if from == Layout::One {
            let _: () = self.c().set(self.k("layout"), Layout::Migrating.as_str()).await.map_err(err)?;
            tracing::info!(wait_s = settle.as_secs_f64(), "store migration: writes wait from now on");
            tokio::time::sleep(settle).await;
            // Read again: what was written before every process saw the layout is moved too.
            found = self.found().await?;
            out.configs = found.prefixes.len();
            out.vms = found.vms.values().map(Vec::len).sum::<usize>() + found.unplaced.len();
            out.bots = found.bots.values().map(Vec::len).sum();
            out.unplaced = found.unplaced.len();
        }
        if from != Layout::Two {
            out.lists = self.copy(&found).await?;
            let pause: Option<String> = self.c().get(self.k("pause")).await.map_err(err)?;
            if let Some(p) = pause.filter(|p| p != MOVED) {
                let _: () = self.c().set(self.k("paused"), p).await.map_err(err)?;
            }
            let _: () = redis::pipe()
                .set(self.k("pause"), MOVED)
                .set(self.k("layout"), Layout::Two.as_str())
                .query_async(&mut self.c())
                .await
                .map_err(err)?;
            tracing::info!(configs = out.configs, vms = out.vms, "store migration: layout 2 in use");
            tokio::time::sleep(settle).await;
        }
        out.deleted = self.delete_old(&found).await?;
        self.forget_layout().await;
        out.to = self.layout().await?.as_str().to_owned();
        Ok(out)
    }

    /// What layout 1 holds: VM ids and observed hostnames by Config, and every prefix that has
    /// something (the registry's, the VMs', the counts', the global audit trail's).
    async fn found(&self) -> Result<Found, StoreError> {
        let mut f = Found::default();
        for id in self.hash_fields(&self.k("vm")).await? {
            match parse_id(&id) {
                Some((p, _)) => f.vms.entry(p.to_owned()).or_default().push(id),
                None => f.unplaced.push(id),
            }
        }
        for h in self.hash_fields(&self.k("bots")).await? {
            if let Some(p) = super::layout::vm_prefix_of_host(&h) {
                f.bots.entry(p.to_owned()).or_default().push(h);
            }
        }
        let cfgs: Vec<String> = self.c().hkeys(self.k("cfg")).await.map_err(err)?;
        let counted: Vec<String> = self.c().hkeys(self.k("counts")).await.map_err(err)?;
        let listed: Vec<String> = self.c().smembers(self.k("vm:cfgs")).await.map_err(err)?;
        let ledgers = self.ledger_configs_listed().await?;
        let audit: Vec<String> = self.c().lrange(self.k("audit"), 0, -1).await.map_err(err)?;
        let audited =
            audit.iter().filter_map(|r| serde_json::from_str::<AuditEntry>(r).ok()).map(|e| e.prefix);
        f.prefixes.extend(cfgs.into_iter().chain(counted).chain(listed).chain(ledgers).chain(audited));
        f.prefixes.extend(f.vms.keys().cloned().chain(f.bots.keys().cloned()));
        f.prefixes.remove(GLOBAL_AUDIT);
        Ok(f)
    }

    /// Step 2's copies; returns how many lists and hashes were copied.
    async fn copy(&self, f: &Found) -> Result<usize, StoreError> {
        for (p, ids) in &f.vms {
            let target = self.kc(p, "vm");
            let _: () = self.c().del(&target).await.map_err(err)?;
            for chunk in ids.chunks(500) {
                let (raw, vers): (Vec<Option<String>>, Vec<Option<String>>) = redis::pipe()
                    .cmd("HMGET")
                    .arg(self.k("vm"))
                    .arg(chunk)
                    .cmd("HMGET")
                    .arg(self.k("vm:ver"))
                    .arg(chunk)
                    .query_async(&mut self.c())
                    .await
                    .map_err(err)?;
                let mut pairs = Vec::new();
                for ((id, raw), ver) in chunk.iter().zip(raw).zip(vers) {
                    let Some(raw) = raw else { continue };
                    pairs.push((id.clone(), raw));
                    if let Some(v) = ver {
                        pairs.push((format!("{id}#v"), format!("{v}|")));
                    }
                }
                if !pairs.is_empty() {
                    let _: () = self.c().hset_multiple(&target, &pairs).await.map_err(err)?;
                }
            }
            let _: () = self.c().sadd(self.k("vm:cfgs"), p).await.map_err(err)?;
            self.v2_rebuild_config(p, &mut Rebuilt::default()).await?;
        }
        for id in &f.unplaced {
            let raw: Option<String> = self.c().hget(self.k("vm"), id).await.map_err(err)?;
            if let Some(raw) = raw {
                let _: () = self.c().hset(self.k("unplaced"), id, raw).await.map_err(err)?;
            }
        }
        for (p, hosts) in &f.bots {
            for chunk in hosts.chunks(1000) {
                let raw: Vec<Option<String>> = redis::cmd("HMGET")
                    .arg(self.k("bots"))
                    .arg(chunk)
                    .query_async(&mut self.c())
                    .await
                    .map_err(err)?;
                let pairs: Vec<(&String, String)> =
                    chunk.iter().zip(raw).filter_map(|(h, r)| r.map(|r| (h, r))).collect();
                if !pairs.is_empty() {
                    let _: () = self.c().hset_multiple(self.kc(p, "bots"), &pairs).await.map_err(err)?;
                }
            }
        }
        let mut lists = 0;
        for p in &f.prefixes {
            for part in OWNED {
                let dump: Option<Vec<u8>> = redis::cmd("DUMP")
                    .arg(self.k(&format!("{part}:{p}")))
                    .query_async(&mut self.c())
                    .await
                    .map_err(err)?;
                let Some(dump) = dump else { continue };
                let _: () = redis::cmd("RESTORE")
                    .arg(self.kc(p, part))
                    .arg(0)
                    .arg(dump)
                    .arg("REPLACE")
                    .query_async(&mut self.c())
                    .await
                    .map_err(err)?;
                lists += 1;
            }
        }
        Ok(lists)
    }

    /// Step 3: deletes what layout 1 kept that was copied; returns how many keys.
    async fn delete_old(&self, f: &Found) -> Result<usize, StoreError> {
        let mut keys: Vec<String> = SHARED.iter().map(|k| self.k(k)).collect();
        for p in &f.prefixes {
            keys.push(self.k(&format!("vm:cfg:{p}")));
            keys.push(self.k(&format!("sums:{p}")));
            keys.extend(OWNED.iter().map(|part| self.k(&format!("{part}:{p}"))));
        }
        let mut deleted = 0;
        for chunk in keys.chunks(100) {
            let n: usize = redis::cmd("UNLINK").arg(chunk).query_async(&mut self.c()).await.map_err(err)?;
            deleted += n;
        }
        let moved: Vec<&String> = f.bots.values().flatten().collect();
        for chunk in moved.chunks(1000) {
            let _: () = self.c().hdel(self.k("bots"), chunk).await.map_err(err)?;
        }
        Ok(deleted)
    }
}
