//! Healing a Config's derived keys in layout 2: the VM records are the truth, each VM's state
//! (`<id>#v`) what its indexes and sums say of it. A rebuild drops keys of the wrong type,
//! computes each VM's state from its record and writes the ones that differ (fenced: only while
//! the VM was not written since), then rebuilds the Config's indexes and sums from the states in
//! one script, so a write racing it is counted once. Every step touches one Config's slot.

use gce_backend_jobs::model::{Undecoded, Vm};
use gce_backend_jobs::ports::store::{Rebuilt, Scope, StoreError};

use super::{VM_PARTS, state_of};
use crate::adapters::redis_store::RedisStore;
use crate::adapters::redis_store::conn::err;

/// The derived keys of a Config and their types (its VM hash is the truth, never dropped).
const DERIVED: [(&str, &str); 6] = [
    ("uncreated", "set"),
    ("created", "set"),
    ("host", "hash"),
    ("deadline", "zset"),
    ("sums", "hash"),
    ("heal", "set"),
];

/// Records read and states written per call.
const CHUNK: usize = 500;

/// The state a rebuild gives a record that does not decode: without an instance, counted as a VM
/// only, no hostname.
const CORRUPT: &str = "0||1@|";

impl RedisStore {
    /// `Store::heal_requests` in layout 2: the Configs flagged.
    pub(crate) async fn v2_heal_scopes(&self) -> Result<Vec<Scope>, StoreError> {
        let listed = self.listed_configs().await?;
        if listed.is_empty() {
            return Ok(Vec::new());
        }
        let cmds: Vec<redis::Cmd> = listed.iter().map(|p| redis::Cmd::exists(self.kc(p, "heal"))).collect();
        let flagged: Vec<bool> = self.each(&cmds).await.map_err(err)?;
        Ok(listed.into_iter().zip(flagged).filter(|(_, f)| *f).map(|(p, _)| Scope::Config(p)).collect())
    }

    /// `Store::derived_sound` in layout 2.
    pub(crate) async fn v2_sound(&self, prefix: &str) -> Result<bool, StoreError> {
        let mut call = self.put2[4].prepare_invoke();
        call.key(self.kc(prefix, "vm")).arg("hash");
        for (part, typ) in DERIVED {
            call.key(self.kc(prefix, part)).arg(typ);
        }
        let ok: i64 = call.invoke_async(&mut self.c()).await.map_err(err)?;
        Ok(ok == 1)
    }

    /// `Store::rebuild` in layout 2: every Config's for [`Scope::All`].
    pub(crate) async fn v2_rebuild(&self, scope: &Scope) -> Result<Rebuilt, StoreError> {
        let prefixes = match scope {
            Scope::Config(p) => vec![p.clone()],
            Scope::All => {
                let (recs, _) = self.raw_configs().await?;
                let mut all = self.listed_configs().await?;
                all.extend(recs.into_keys());
                all.sort();
                all.dedup();
                all
            }
        };
        let mut out = Rebuilt::default();
        for p in &prefixes {
            self.v2_rebuild_config(p, &mut out).await?;
        }
        Ok(out)
    }

    /// Rebuilds Config `prefix`'s derived keys, adding what it found to `out`.
    pub(crate) async fn v2_rebuild_config(&self, prefix: &str, out: &mut Rebuilt) -> Result<(), StoreError> {
        let mut call = crate::adapters::redis_store::heal::DROP.prepare_invoke();
        for (part, typ) in DERIVED {
            call.key(self.kc(prefix, part)).arg(typ);
        }
        let dropped: Vec<String> = call.invoke_async(&mut self.c()).await.map_err(err)?;
        let tag = self.kc(prefix, "");
        out.replaced
            .extend(dropped.into_iter().map(|k| format!("{}{prefix}", k.strip_prefix(&tag).unwrap_or(&k))));
        let ids = self.v2_record_ids(prefix).await?;
        for chunk in ids.chunks(CHUNK) {
            out.fixed += self.v2_states(prefix, chunk, &mut out.corrupt).await?;
        }
        let mut call = self.put2[3].prepare_invoke();
        for part in VM_PARTS.iter().filter(|p| **p != "bots") {
            call.key(self.kc(prefix, part));
        }
        let (vms, fixed, stale, differ, _unknown): (usize, usize, usize, i64, usize) =
            call.arg(gce_backend_jobs::model::SUMS).invoke_async(&mut self.c()).await.map_err(err)?;
        out.vms += vms;
        out.fixed += fixed;
        out.stale += stale;
        if differ == 1 {
            out.recounted.push(prefix.to_owned());
        }
        Ok(())
    }

    /// The ids of Config `prefix`'s VM records (HSCAN: no read holds Redis for long).
    async fn v2_record_ids(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let fields = self.hash_fields(&self.kc(prefix, "vm")).await?;
        Ok(fields.into_iter().filter(|f| !f.ends_with("#v")).collect())
    }

    /// Computes the states of `ids` from their records and writes those that differ (while
    /// not written since); returns how many did, adding records that do not decode to `corrupt`.
    async fn v2_states(
        &self,
        prefix: &str,
        ids: &[String],
        corrupt: &mut Vec<String>,
    ) -> Result<usize, StoreError> {
        let key = self.kc(prefix, "vm");
        let fields: Vec<String> = ids.iter().flat_map(|id| [id.clone(), format!("{id}#v")]).collect();
        let read: Vec<Option<String>> =
            redis::cmd("HMGET").arg(&key).arg(&fields).query_async(&mut self.c()).await.map_err(err)?;
        let mut call = self.put2[2].prepare_invoke();
        call.key(&key);
        let mut any = false;
        for (id, pair) in ids.iter().zip(read.chunks(2)) {
            let [Some(raw), ver] = pair else { continue };
            let state = match Vm::decode(raw) {
                Ok(vm) if vm.config != prefix || vm.id != *id => continue, // not this Config's
                Ok(vm) => state_of(&vm),
                Err(Undecoded::Newer(_)) => continue, // (left to the build that wrote it)
                Err(Undecoded::Corrupt(_)) => {
                    corrupt.push(id.clone());
                    CORRUPT.to_owned()
                }
            };
            let was = ver.clone().unwrap_or_default();
            if was.split_once('|').map(|(_, s)| s) == Some(state.as_str()) {
                continue;
            }
            call.arg(id).arg(was).arg(state);
            any = true;
        }
        if !any {
            return Ok(0);
        }
        call.invoke_async(&mut self.c()).await.map_err(err)
    }
}
