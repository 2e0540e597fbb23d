//! What a Config owns besides its VMs, in either layout: bot observations (by the Config in the
//! hostname, in layout 2), a deleted Config's status, and the global pause; and how a layout-1
//! write refused by the layout check is answered.

use gce_backend_jobs::model::{Observed, Pause, Series};
use gce_backend_jobs::ports::store::StoreError;
use redis::AsyncCommands;

use super::RedisStore;
use super::conn::{err, err_at, json, lenient};
use super::layout::{Layout, migrating};

/// The value a migration leaves in layout 1's pause key: not a pause any build can read, so a
/// build that knows only layout 1 and still runs reads it as a pause and stops making and
/// removing machines (it says so on its status), instead of acting on keys no longer kept.
pub(super) const MOVED: &str =
    "moved to key layout 2: a build that reads layout 1 only must not act on this store";

/// Hostnames and what to do with them, grouped by the hash they live in.
fn grouped<'a>(
    store: &RedisStore,
    l: Layout,
    hostnames: impl Iterator<Item = (usize, &'a String)>,
) -> std::collections::BTreeMap<String, Vec<usize>> {
    let mut by: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for (i, h) in hostnames {
        by.entry(store.bots_key(l, h)).or_default().push(i);
    }
    by
}

impl RedisStore {
    /// `Store::put_bots`.
    pub(super) async fn write_bots(&self, bots: &[Observed]) -> Result<(), StoreError> {
        let l = self.writing().await?;
        let by = grouped(self, l, bots.iter().map(|o| &o.bot.id).enumerate());
        for (key, at) in by {
            for chunk in at.chunks(1000) {
                let pairs: Vec<(String, String)> = chunk
                    .iter()
                    .map(|&i| Ok((bots[i].bot.id.clone(), json(&bots[i])?)))
                    .collect::<Result<_, StoreError>>()?;
                let _: () = self.c().hset_multiple(&key, &pairs).await.map_err(err)?;
            }
        }
        Ok(())
    }

    /// `Store::bots`.
    pub(super) async fn read_bots(&self, hostnames: &[String]) -> Result<Vec<Option<Observed>>, StoreError> {
        let l = self.layout().await?;
        let mut out = vec![None; hostnames.len()];
        for (key, at) in grouped(self, l, hostnames.iter().enumerate()) {
            for chunk in at.chunks(1000) {
                let names: Vec<&String> = chunk.iter().map(|&i| &hostnames[i]).collect();
                let raw: Vec<Option<String>> = redis::cmd("HMGET")
                    .arg(&key)
                    .arg(&names)
                    .query_async(&mut self.c())
                    .await
                    .map_err(err)?;
                for (&i, r) in chunk.iter().zip(raw) {
                    let h = &hostnames[i];
                    out[i] = r.and_then(|r| lenient(&format!("bot {h}"), &r));
                }
            }
        }
        Ok(out)
    }

    /// `Store::observed`: every hostname observed, in every hash.
    pub(super) async fn observed_hosts(&self) -> Result<Vec<String>, StoreError> {
        let mut keys = vec![self.k("bots")];
        if self.layout().await? == Layout::Two {
            let listed: Vec<String> = self.c().smembers(self.k("vm:cfgs")).await.map_err(err)?;
            keys.extend(listed.iter().map(|p| self.kc(p, "bots")));
        }
        let cmds: Vec<redis::Cmd> = keys.iter().map(redis::Cmd::hkeys).collect();
        let all: Vec<Vec<String>> = self.each(&cmds).await.map_err(err)?;
        Ok(all.into_iter().flatten().collect())
    }

    /// `Store::forget_bots`.
    pub(super) async fn drop_bots(&self, hostnames: &[String]) -> Result<(), StoreError> {
        let l = self.writing().await?;
        for (key, at) in grouped(self, l, hostnames.iter().enumerate()) {
            for chunk in at.chunks(1000) {
                let names: Vec<&String> = chunk.iter().map(|&i| &hostnames[i]).collect();
                let _: () = self.c().hdel(&key, names).await.map_err(err)?;
            }
        }
        Ok(())
    }

    /// `Store::drop_status`: a deleted Config's sums, counts, counters, errors and samples.
    pub(super) async fn drop_owned(&self, prefix: &str) -> Result<(), StoreError> {
        let l = self.writing().await?;
        let cmds = [
            redis::Cmd::del(self.owned(l, prefix, "sums")),
            redis::Cmd::hdel(self.k("counts"), prefix),
            redis::Cmd::del(self.owned(l, prefix, "counters")),
            redis::Cmd::del(self.owned(l, prefix, "err")),
            redis::Cmd::del(self.series_key(l, &Series::Config(prefix.to_owned()))),
        ];
        let _: Vec<i64> = self.each(&cmds).await.map_err(err)?;
        Ok(())
    }

    /// The global pause's key in layout `l` (layout 2 keeps it apart from layout 1's, which the
    /// migration leaves as [`MOVED`]).
    pub(super) fn pause_key(&self, l: Layout) -> String {
        self.k(if l == Layout::Two { "paused" } else { "pause" })
    }

    /// `Store::global_pause`.
    pub(super) async fn read_pause(&self) -> Result<Option<Pause>, StoreError> {
        let key = self.pause_key(self.layout().await?);
        let mut raw: Option<String> = self.c().get(key).await.map_err(err_at("pause"))?;
        if raw.as_deref() == Some(MOVED) {
            // (read as migrating a moment ago; the store is in layout 2 now)
            raw = self.c().get(self.pause_key(Layout::Two)).await.map_err(err_at("pause"))?;
        }
        // Not lenient: an unreadable pause is reported, and read as a pause by the caller.
        raw.map(|r| serde_json::from_str(&r).map_err(|e| StoreError::corrupt("pause", e))).transpose()
    }

    /// `Store::set_global_pause`.
    pub(super) async fn write_pause(&self, pause: Option<&Pause>) -> Result<(), StoreError> {
        let key = self.pause_key(self.writing().await?);
        match pause {
            Some(p) => self.c().set(key, json(p)?).await.map_err(err),
            None => self.c().del(key).await.map_err(err),
        }
    }

    /// The answer of a layout-1 record write: one the layout check refused (the store moved on
    /// since this process read its layout) waits, and the layout is read again.
    pub(super) async fn v1_write<T>(&self, r: redis::RedisResult<T>) -> Result<T, StoreError> {
        match r {
            Err(e) if e.code() == Some("LAYOUT") => {
                self.forget_layout().await;
                Err(migrating())
            }
            r => r.map_err(err),
        }
    }
}
