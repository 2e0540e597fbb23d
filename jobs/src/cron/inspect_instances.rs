//! `inspect_instances`: the periodic scan of every provider's machines, between its
//! `scan_prepare` and `scan_cleanup`: every (project, zone) of a Config whose provider scans
//! zones (`Provider::scans_zones`) → `inspect_instances`, spread over `timing.fan_out_jitter`. A
//! provider whose `scan_prepare` fails is left out of this scan (logged); the others go on.

use std::collections::{BTreeMap, BTreeSet};

use crate::env::Ports;
use crate::work::InspectInstances;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    let mut by_provider: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for c in store.configs().await? {
        let config = &c.value.config;
        let id = ctx.providers.declared().resolve(&config.provider).to_owned();
        let places = by_provider.entry(id).or_default();
        for zone in config.zone_names() {
            places.insert((config.attributes.project.clone(), zone.to_owned()));
        }
    }
    let mut tasks = Vec::new();
    let mut scanned = Vec::new();
    for (id, places) in by_provider {
        let prepared = match ctx.providers.get(ctx, &id).await {
            Ok(p) => p.scan_prepare(ctx).await.map(|()| p),
            Err(e) => Err(e),
        };
        match prepared {
            Ok(p) => {
                if p.scans_zones() {
                    tasks
                        .extend(places.into_iter().map(|(project, zone)| InspectInstances { project, zone }));
                }
                scanned.push(p);
            }
            Err(e) => tracing::warn!(provider = %id, error = %e, "provider not scanned this time"),
        }
    }
    let pushed = ctx.push_spread(&tasks).await?;
    for p in scanned {
        if let Err(e) = p.scan_cleanup(ctx).await {
            tracing::warn!(provider = ?p, error = %e, "provider scan cleanup failed");
        }
    }
    Ok(pushed)
}

#[cfg(test)]
mod tests;
