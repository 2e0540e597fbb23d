//! `register`: a VM says it is up, with an identity proof its provider checks (Compute Engine: an
//! instance identity token). Once per incarnation: the VM is recorded as registered (a
//! compare-and-set), its `manage_bot` runs at once, and the VM is told what its agent needs.
//! Every failure is one [`Refused`]: callers answer one generic refusal (seed 000: nothing that
//! tells a guesser which part was wrong) and keep the reason for their logs.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ctx::Ctx;
use crate::identity::Refused;
use crate::records::writes::write_vm_at;
use crate::work::ManageBot;

/// What a VM sends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterInput {
    /// The identity proof (Compute Engine: the instance identity token, `format=full`, whose
    /// audience is this service's root URL).
    pub proof: String,
    /// The provider that made the machine (empty: the default).
    #[serde(default)]
    pub provider: String,
}

/// What a registered VM is told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Registration {
    /// VM id.
    pub vm: String,
    /// Its Config.
    pub config: String,
    /// Its hostname (the bot id).
    pub hostname: String,
    /// The Swarming server its bot connects to.
    pub swarming: String,
    /// When this incarnation is retired (its bot is asked to stop then), if known yet.
    pub deadline: Option<DateTime<Utc>>,
    /// When this answer stops being valid (the proof's expiry).
    pub expires: DateTime<Utc>,
}

/// Registers the machine `input.proof` proves to be, for `audience` (this service's root URL);
/// counts the result (`registrations{result}`: ok, or why it was refused).
pub async fn register(ctx: &Ctx, input: &RegisterInput, audience: &str) -> Result<Registration, Refused> {
    let out = attempt(ctx, input, audience).await;
    ctx.metrics.registration(out.as_ref().map_or_else(|r| r.0, |_| "ok"));
    out
}

async fn attempt(ctx: &Ctx, input: &RegisterInput, audience: &str) -> Result<Registration, Refused> {
    let provider = ctx.providers.get(ctx, &input.provider).await.map_err(|_| Refused("no such provider"))?;
    let proven = provider.identify(ctx, &input.proof, audience).await?;
    // A record naming a server the settings no longer list (or never did) hands it to no VM.
    ctx.settings.trust.server(&proven.vm.value.swarming).map_err(|_| Refused("server not listed"))?;
    let hostname = proven.vm.value.hostname.clone();
    let now = ctx.now();
    // Re-checked on the record written (a lost race re-reads it): the same incarnation, whose
    // instance, if recorded meanwhile, is the one proven.
    let same = |v: &crate::model::Vm| {
        v.hostname == hostname
            && v.instance
                .as_ref()
                .is_none_or(|p| p.instance_id.is_empty() || p.instance_id == proven.instance_id)
    };
    let written = write_vm_at(ctx, proven.vm.clone(), |v| {
        same(v) && v.registered.is_none() && {
            v.registered = Some(now);
            true
        }
    })
    .await
    .map_err(|_| Refused("store"))?;
    let Some((cur, true)) = written else { return Err(Refused("already registered")) };
    let vm = cur.value;
    tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "VM registered");
    // Its bot is looked at now rather than at the next scheduled look (hurried: a look already
    // scheduled for later is brought forward).
    if let Err(e) = ctx.push_at(&ManageBot { id: vm.id.clone() }, gce_backend_queues::When::Hurry).await {
        tracing::warn!(vm = %vm.id, error = %e, "registered, but its manage_bot could not be pushed now");
    }
    Ok(Registration {
        deadline: vm.deadline(),
        vm: vm.id,
        config: vm.config,
        hostname: vm.hostname,
        swarming: vm.swarming,
        expires: proven.expires,
    })
}

#[cfg(test)]
mod tests;
