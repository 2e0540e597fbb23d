//! Demand-driven Configs: one reading of a Swarming server's work. Pending tasks are counted
//! with one `CountTasks` per distinct dimension set of the server's demand-driven Configs (not
//! per VM); busy and idle bots come from the Configs' VMs and the last walk's observations.
//!
//! **Counted once.** A pending task carries every dimension it asks for as a tag, so a task that
//! matches a more specific dimension set also matches every set it contains. Each task is
//! counted for the most specific set it matches: a set's count less the counts of the sets read
//! that strictly contain it (never below 0; a task matching two such sets that do not contain
//! each other is taken off twice, so demand is under-counted there, never counted twice).
//! Configs with the same set share its count evenly, the remainder to the first prefixes.
//!
//! **Held on an outage.** When the count cannot be read, a Config keeps the target it had
//! (recorded on its status, `held`), so an outage never shrinks a pool.

use std::collections::BTreeMap;

use crate::env::Env;
use crate::error::TaskError;
use crate::model::release::Standing;
use crate::model::{ConfigRecord, Vm};
use crate::ports::bots::PENDING_LOOKBACK;
use crate::ports::store::VmIndex;
use crate::work::ExpandConfig;
use crate::{model::demand_reading::DemandState, model::demand_reading::Reading};

/// The stage errors of a reading are recorded under.
pub const STAGE: &str = "read_demand";

/// Splits `counts` (a count per dimension set, as tags) so each task counts for the most
/// specific set it matches: a set's count less those of the sets strictly containing it, at
/// least 0.
pub fn exclusive(counts: &BTreeMap<Vec<String>, u32>) -> BTreeMap<Vec<String>, u32> {
    let contains =
        |big: &[String], small: &[String]| big.len() > small.len() && small.iter().all(|t| big.contains(t));
    counts
        .iter()
        .map(|(set, n)| {
            let inner: u32 = counts.iter().filter(|(o, _)| contains(o, set)).map(|(_, m)| *m).sum();
            (set.clone(), n.saturating_sub(inner))
        })
        .collect()
}

/// The share of `n` tasks of the `k`-th of `of` Configs sharing a set (evenly, the remainder to
/// the first).
pub fn share(n: u32, k: usize, of: usize) -> u32 {
    let of = of.max(1) as u32;
    n / of + u32::from((k as u32) < n % of)
}

/// Reads the work of every demand-driven Config of Swarming server `server` and records each
/// one's target; a Config whose target changed is expanded at once. Returns how many Configs
/// it read.
pub async fn read(env: &Env, server: &str) -> Result<usize, TaskError> {
    let configs: Vec<ConfigRecord> = env
        .ports
        .store
        .configs()
        .await?
        .into_iter()
        .map(|c| c.value)
        .filter(|r| r.config.swarming == server && r.config.demand.is_some() && !r.config.is_static())
        .collect();
    // Configs by dimension set (prefix order within a set).
    let mut sets: BTreeMap<Vec<String>, Vec<&ConfigRecord>> = BTreeMap::new();
    for r in &configs {
        sets.entry(r.config.demand.as_ref().map(|d| d.tags()).unwrap_or_default()).or_default().push(r);
    }
    let now = env.now();
    let mut counts = BTreeMap::new();
    let mut failed = BTreeMap::new();
    for set in sets.keys() {
        match env.ports.bots.count_pending(server, set, now - PENDING_LOOKBACK).await {
            Ok(n) => {
                counts.insert(set.clone(), n);
            }
            Err(e) => {
                failed.insert(set.clone(), e.to_string());
            }
        }
    }
    // A set under one that could not be read is held too: its count would hold that one's tasks.
    let covered: Vec<(Vec<String>, String)> = sets
        .keys()
        .filter(|s| !failed.contains_key(*s))
        .filter_map(|s| {
            let under = failed.keys().find(|f| f.len() > s.len() && s.iter().all(|t| f.contains(t)))?;
            Some((
                s.clone(),
                format!("the more specific dimension set {} could not be read", under.join(",")),
            ))
        })
        .collect();
    for (s, why) in covered {
        counts.remove(&s);
        failed.insert(s, why);
    }
    let pending = exclusive(&counts);
    for (set, members) in &sets {
        for (k, rec) in members.iter().enumerate() {
            let prefix = &rec.config.prefix;
            let state = match (pending.get(set), failed.get(set)) {
                (Some(n), _) => {
                    let mut r = tally(env, rec).await?;
                    r.pending = share(*n, k, members.len());
                    env.resolved(prefix, &[STAGE]).await?;
                    DemandState::read(
                        rec.config.demand.as_ref().expect("filtered"),
                        r,
                        rec.demand.as_ref(),
                        now,
                    )
                }
                (None, e) => {
                    let what = format!(
                        "Swarming server {server} does not answer CountTasks: {}",
                        e.map_or("", |e| e)
                    );
                    env.record_once(
                        prefix,
                        STAGE,
                        "demand_unread",
                        &format!("demand not read, target held: {what}"),
                    )
                    .await?;
                    DemandState::held(rec.demand.as_ref(), rec.current_amount, &what, now)
                }
            };
            record(env, prefix, state).await?;
        }
    }
    Ok(configs.len())
}

/// Records `state` on Config `prefix` (when it says something new, or the last is a minute old)
/// and expands the Config at once when the amount it targets changes.
async fn record(env: &Env, prefix: &str, state: DemandState) -> Result<(), TaskError> {
    let now = state.at;
    let mut before = 0;
    let written = crate::records::writes::update_config::<TaskError>(env, prefix, |rec| {
        before = rec.amount_at(now);
        let stale = rec
            .demand
            .as_ref()
            .is_none_or(|d| d.differs(&state) || d.at + chrono::TimeDelta::minutes(1) <= now);
        if stale {
            rec.demand = Some(state.clone());
        }
        Ok(stale)
    })
    .await?;
    if let Some((rec, true)) = written
        && rec.amount_at(now) != before
    {
        tracing::info!(config = %prefix, from = before, to = rec.amount_at(now), why = %state.why, "demand changes the target");
        env.push(&ExpandConfig { prefix: prefix.to_owned() }).await?;
    }
    Ok(())
}

/// The bots of Config `rec`'s live VMs (not drained, not kept warm; resuming ones count), from its VM records and the last
/// observations of their bots.
async fn tally(env: &Env, rec: &ConfigRecord) -> Result<Reading, TaskError> {
    let Some(d) = &rec.config.demand else { return Ok(Reading::default()) };
    let now = env.now();
    let ids = env.ports.store.vm_ids(VmIndex::OfConfig(rec.config.prefix.clone())).await?;
    let (vms, seen) = crate::records::writes::vms_and_bots(env, &ids).await?;
    // An observation older than `observation_ttl` says nothing of now (a walk failed): such a
    // bot counts as idle, never as idle for long nor seen idle (to spare), so a ListBots outage
    // shrinks nothing.
    let ttl = env.settings.timing.observation_ttl.chrono();
    // Live: not drained, not kept warm (parked, or to be); resuming counts, as booting does.
    let live = |v: &Vm| {
        !v.drained && !rec.warm.contains(&v.index) && v.parked.as_ref().is_none_or(|p| p.waking.is_some())
    };
    let mut r = Reading { parks: rec.config.warm_room() > 0, ..Reading::default() };
    for (vm, o) in vms.iter().zip(&seen).filter(|(v, _)| live(v)) {
        r.live += 1;
        match Standing::of(vm, o.as_ref().filter(|o| o.at + ttl > now)) {
            Standing::Busy => r.busy += 1,
            Standing::Idle(since) => {
                r.idle += 1;
                r.seen_idle += 1;
                r.idle_long += u32::from(since + d.idle_timeout.chrono() <= now);
            }
            Standing::Unknown => r.idle += 1,
            Standing::NotMade | Standing::Down | Standing::Booting => {}
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests;
