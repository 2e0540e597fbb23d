//! A Config's counts, read in O(1) from the store's per-Config and per-zone sums (kept with
//! every VM write), counted again from its VMs when they do not yet cover them or disagree.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::error::TaskError;
use crate::model::{Counts, SUMS, Sums, split_place};
use crate::ports::store::{Store, StoreError, VmIndex};

/// A Config's counts now, exact, and whether anything of it is left (its record or a VM): the
/// store's per-Config sums, read in O(1). The first call for a Config whose sums do not yet cover
/// every VM (VMs written before sums were kept) counts those in, once.
pub async fn tally(store: &dyn Store, prefix: &str, now: DateTime<Utc>) -> Result<(Counts, bool), TaskError> {
    let config = match store.config(prefix).await {
        Err(StoreError::Corrupt { .. } | StoreError::Newer { .. }) => None,
        other => other?.map(|c| c.value),
    };
    let configured = config.as_ref().map_or(0, |c| c.current_amount);
    let counts = of_config(store, prefix, configured, now).await?;
    // No VM counted: one left only as an undecodable record still keeps the Config's status.
    let left = config.is_some()
        || counts.vms > 0
        || !store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await?.is_empty();
    Ok((counts, left))
}

/// The counts of Config `prefix` whose record, already in hand, sets `amount` as its current
/// amount: its sums ([`sums`]) read in O(1), its record not read again.
pub async fn of_config(
    store: &dyn Store,
    prefix: &str,
    amount: u32,
    now: DateTime<Utc>,
) -> Result<Counts, TaskError> {
    Ok(Counts::from_sums(amount, &sums(store, prefix).await?, now))
}

/// A Config's sums of [`crate::model::Vm::counted`] (VMs, created, running, …), O(1); the first
/// call for a Config whose sums do not yet cover every VM (VMs written before sums were kept)
/// counts those in, once.
pub async fn sums(store: &dyn Store, prefix: &str) -> Result<Sums, TaskError> {
    if let Some(s) = store.sums(prefix).await? {
        return Ok(s);
    }
    for id in store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await? {
        match store.vm(&id).await {
            Ok(Some(vm)) => store.count_in(&vm).await?,
            // Gone, or a record that does not decode (reported and repaired elsewhere).
            Ok(None) | Err(StoreError::Corrupt { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    store.sums_complete(prefix).await?;
    Ok(store.sums(prefix).await?.unwrap_or_default())
}

/// A Config's sums per zone (zones with a name), O(1): its [`place_sums`] with each zone's ranks
/// added up.
pub async fn zone_sums(store: &dyn Store, prefix: &str) -> Result<BTreeMap<String, Sums>, TaskError> {
    let mut zones: BTreeMap<String, Sums> = BTreeMap::new();
    for (place, s) in place_sums(store, prefix).await? {
        let sum = zones.entry(split_place(&place).0.to_owned()).or_insert([0; SUMS]);
        for (t, v) in sum.iter_mut().zip(s) {
            *t += v;
        }
    }
    Ok(zones)
}

/// A Config's sums per rank of its machine types (rank 0 holds VMs made without one), O(1).
pub async fn rank_sums(store: &dyn Store, prefix: &str) -> Result<BTreeMap<u32, Sums>, TaskError> {
    let mut ranks: BTreeMap<u32, Sums> = BTreeMap::new();
    for (place, s) in place_sums(store, prefix).await? {
        let sum = ranks.entry(split_place(&place).1).or_insert([0; SUMS]);
        for (t, v) in sum.iter_mut().zip(s) {
            *t += v;
        }
    }
    Ok(ranks)
}

/// A Config's sums per place (zone, or zone and fallback rank: [`crate::model::Vm::place`]; places
/// with a name), O(1). When they disagree with its totals (VMs counted before zone sums were
/// kept, or written by a build that keeps none), they are counted again from its VMs first, once.
async fn place_sums(store: &dyn Store, prefix: &str) -> Result<BTreeMap<String, Sums>, TaskError> {
    let mut read = store.zone_sums(prefix).await?;
    if read.is_none() {
        sums(store, prefix).await?; // counts in VMs written before sums were kept
        read = store.zone_sums(prefix).await?;
    }
    let Some((totals, mut zones)) = read else { return Ok(BTreeMap::new()) };
    if (0..SUMS).any(|i| zones.values().map(|z| z[i]).sum::<i64>() != totals[i]) {
        tracing::info!(config = prefix, "zone sums disagree with the totals: counted again");
        store.recount_zones(prefix).await?;
        zones = store.zone_sums(prefix).await?.map(|(_, z)| z).unwrap_or_default();
    }
    zones.remove("");
    Ok(zones)
}
