//! Spot failover, in one place. A Spot pool with `spot_failover` counts its VMs' preemptions
//! (an instance found down or gone, from `lifecycle::replace_down`) and its refused Spot inserts
//! (stockout or quota, from the Compute Engine provider) on its Config record, each once (keyed
//! by hostname and insert), with a compare-and-set so every process shares the count. More than
//! `more_than` within `within` fail it over: the VMs it makes from then on are standard
//! (`ConfigRecord::new_vm_attributes`), and those of its Spot VMs not sent to Compute yet are
//! made again as standard ones at once. When `cooldown` has passed it makes Spot VMs again; the
//! standard ones stay until their lifetime ends (they are not outdated: `model::outdated`).
//! Said once per start, lengthening and end (INFO); shown in status and `/metrics`.

use crate::env::Env;
use crate::error::TaskError;
use crate::model::{ConfigRecord, Vm};
use crate::ports::store::VmIndex;
use crate::work::ExpandConfig;
use crate::{model::spot_state::Added, model::spot_state::SpotEventKind};
use crate::{records::writes::drop_uncreated, records::writes::readable_vm, records::writes::update_config};

/// `vm`'s instance was found down or gone: a preemption when it was made Spot and is not kept
/// warm (a parked instance is stopped on purpose). Counted once per incarnation.
pub async fn preempted(ctx: &Env, vm: &Vm) -> Result<(), TaskError> {
    if !vm.attributes.preemptible() || vm.parked.is_some() {
        return Ok(());
    }
    count(ctx, vm, &vm.hostname, SpotEventKind::Preempted).await.map(drop)
}

/// Compute refused `vm`'s insert for want of capacity or quota (`code`; `op`: the failed
/// operation, empty when refused outright), and the VM is no longer sent: counted once per
/// insert when it was made Spot. While its Config is failed over, the VM is made again as a
/// standard one at once.
pub async fn refused(ctx: &Env, vm: &Vm, code: &str, op: &str) -> Result<(), TaskError> {
    if !vm.attributes.preemptible() {
        return Ok(());
    }
    let key = match (op, vm.insert_sent) {
        ("", Some(sent)) => format!("{}#{}@{}", vm.hostname, vm.insert_attempt, sent.timestamp_millis()),
        ("", None) => format!("{}#{}", vm.hostname, vm.insert_attempt),
        (op, _) => format!("{}/{op}", vm.hostname),
    };
    tracing::debug!(config = %vm.config, vm = %vm.id, code, "Spot insert refused");
    if let Some(rec) = count(ctx, vm, &key, SpotEventKind::Refused).await?
        && rec.spot_failover(ctx.now()).is_some()
    {
        remake(ctx, vm).await?;
    }
    Ok(())
}

/// Counts event `key` of `kind` on `vm`'s Config (one that has `spot_failover`); says a start or
/// a lengthening, and on a start makes the pool's unsent Spot VMs again. Returns the record as
/// it stands (`None`: no such Config, or no failover for it).
async fn count(
    ctx: &Env,
    vm: &Vm,
    key: &str,
    kind: SpotEventKind,
) -> Result<Option<ConfigRecord>, TaskError> {
    let now = ctx.now();
    let mut added = Added::Seen;
    let found = update_config(ctx, &vm.config, |rec| {
        let Some(rule) = rec.config.spot_failover.clone() else { return Ok::<_, TaskError>(false) };
        added = rec.spot.add(&rule, key, kind, now);
        Ok(added != Added::Seen)
    })
    .await?;
    let Some((rec, wrote)) = found.filter(|(rec, _)| rec.config.spot_failover.is_some()) else {
        return Ok(None);
    };
    let prefix = &vm.config;
    match (wrote, added, rec.spot_failover(now)) {
        (true, Added::Started, Some(f)) => {
            tracing::info!(config = %prefix, preempted = f.preempted, refused = f.refused, until = %f.until, last = %vm.hostname, "Spot failover: new VMs are standard until the cooldown ends");
            let unsent = unsent_spot(ctx, prefix).await?;
            for v in &unsent {
                remake(ctx, v).await?;
            }
        }
        (true, Added::Lengthened, Some(f)) => {
            tracing::info!(config = %prefix, preempted = f.preempted, refused = f.refused, until = %f.until, "Spot failover lengthened: Spot VMs still fail");
        }
        (true, _, _) => {
            tracing::debug!(config = %prefix, vm = %vm.id, kind = kind.as_str(), "Spot event counted");
        }
        _ => {}
    }
    Ok(Some(rec))
}

/// The VMs of Config `prefix` made Spot and not sent to Compute (no insert in flight, no
/// instance): those a failover makes again as standard ones. Reads every VM of the Config.
async fn unsent_spot(ctx: &Env, prefix: &str) -> Result<Vec<Vm>, TaskError> {
    let mut out = Vec::new();
    for id in ctx.ports.store.vm_ids(VmIndex::OfConfig(prefix.to_owned())).await? {
        if let Some(v) = readable_vm(ctx, &id).await?
            && unsent(&v)
        {
            out.push(v);
        }
    }
    Ok(out)
}

/// True for a Spot VM with nothing at Compute: no instance, no insert sent or in flight.
fn unsent(v: &Vm) -> bool {
    v.attributes.preemptible() && v.instance.is_none() && v.insert_sent.is_none() && v.operation.is_empty()
}

/// Drops `vm`'s record if it is still this unsent Spot incarnation, and asks for its Config's
/// expansion: made again at once, standard while the failover is in force.
async fn remake(ctx: &Env, vm: &Vm) -> Result<(), TaskError> {
    let hostname = vm.hostname.clone();
    drop_uncreated(ctx, &vm.id, |v| v.hostname == hostname && unsent(v)).await?;
    if ctx.ports.store.vm(&vm.id).await?.is_none_or(|v| v.value.hostname != hostname) {
        tracing::debug!(config = %vm.config, vm = %vm.id, "Spot failover: an unsent Spot VM is made again as a standard one");
        ctx.push(&ExpandConfig { prefix: vm.config.clone() }).await?;
    }
    Ok(())
}

/// `expand_config`'s look at `rec`: a failover whose cooldown has passed is over (said once:
/// new VMs are Spot again). One write only when one ends.
pub async fn settle(ctx: &Env, rec: &ConfigRecord) -> Result<(), TaskError> {
    let now = ctx.now();
    if rec.spot.failover.as_ref().is_none_or(|f| now < f.until) {
        return Ok(());
    }
    let mut ended = None;
    let found = update_config(ctx, &rec.config.prefix, |r| {
        ended = r.spot.ended(now);
        Ok::<_, TaskError>(ended.is_some())
    })
    .await?;
    if let (Some((_, true)), Some(f)) = (found, ended) {
        let minutes = (f.until - f.since).num_minutes();
        tracing::info!(config = %rec.config.prefix, since = %f.since, minutes, "Spot failover over: new VMs are Spot again; the standard ones are replaced when their lifetime ends");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
