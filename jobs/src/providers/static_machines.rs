//! The static provider (seed 000's `static` type, seed 004's `StaticResources`): a Config lists
//! existing machines by hostname (`machines`) instead of an amount. Nothing is made or removed:
//! a VM of a listed hostname is "created" by recording the machine at once, its bot is watched
//! like any other (connected, dead, terminated at the deadline when the Config has a lifetime),
//! and a hostname taken off the list is drained: its bot finishes its task, is terminated, and
//! is deleted from Swarming with the VM record.

use async_trait::async_trait;

use crate::catalog::Verdict;
use crate::config::{Config, ConfigError};
use crate::env::Env;
use crate::error::TaskError;
use crate::model::{Placed, Vm};
use crate::ports::store::Versioned;
use crate::providers::{Health, Kind, Provider};
use crate::work::Next;

/// The static provider.
#[derive(Debug, Clone, Copy, Default)]
pub struct Static;

/// The part of a Config the static provider reads (its published schema).
#[derive(Debug, schemars::JsonSchema)]
#[allow(dead_code)]
pub struct StaticFields {
    /// Hostnames of the existing machines (their bot ids): lowercase DNS names, each listed once
    /// and in no other Config. A hostname keeps its VM id while it is listed.
    pub machines: Vec<String>,
    /// How long a bot runs before it is terminated (after its task) and watched anew; 0 or
    /// absent: never.
    pub lifetime: Option<crate::config::Secs>,
}

/// The refusal of an operation that adds or removes machines by other means than the list.
pub fn managed_by_list(prefix: &str, what: &str) -> crate::operate::OpError {
    crate::operate::OpError::Invalid(vec![ConfigError {
        field: format!("{prefix}.{what}"),
        rule: "static machines are managed by their list: add or remove hostnames in `machines` \
               (a removed machine finishes its task, then its bot is deleted)"
            .into(),
    }])
}

/// The rules of a static Config: a list of valid, distinct hostnames that this service would
/// never make itself; no amount and no instance attributes (nothing is made).
pub fn problems(config: &Config, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
    let err = |field: String, rule: &str| ConfigError { field, rule: rule.to_owned() };
    if config.amount != crate::config::Amount::default() {
        out.push(err(f("amount"), "a static pool lists its machines: remove amount"));
    }
    if config.attributes != crate::config::Attributes::default() || !config.zones.is_empty() {
        out.push(err(f("attributes"), "a static pool's machines exist already: remove attributes"));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, h) in config.machines.iter().flatten().enumerate() {
        let field = f(&format!("machines[{i}]"));
        if !crate::config::valid_host(h) {
            out.push(err(field, "must be a lowercase hostname: labels of a-z, 0-9 and '-', dot-separated, at most 253 characters"));
        } else if crate::naming::vm_id_of(h).is_some() {
            out.push(err(
                field,
                "has the shape of a hostname this service makes (<prefix>-<index>-xxxx): rename the machine",
            ));
        } else if !seen.insert(h.as_str()) {
            out.push(err(field, "is listed twice"));
        }
    }
}

/// The rule across Configs: a machine belongs to one pool. The first hostname of `config` that
/// one of `others` (the stored Configs; its own prefix is skipped) lists (`None`: none).
pub fn taken<'a>(config: &Config, others: impl IntoIterator<Item = &'a Config>) -> Option<ConfigError> {
    let list = config.machines.as_ref().filter(|l| !l.is_empty())?;
    for o in others.into_iter().filter(|o| o.prefix != config.prefix) {
        let theirs: std::collections::HashSet<&str> =
            o.machines.iter().flatten().map(String::as_str).collect();
        if let Some((i, h)) = list.iter().enumerate().find(|(_, h)| theirs.contains(h.as_str())) {
            let rule = format!("{h} is listed by Config {} too: a machine belongs to one pool", o.prefix);
            return Some(ConfigError { field: format!("{}.machines[{i}]", config.prefix), rule });
        }
    }
    None
}

/// The guard of a static VM's incarnation: the machine is the same from one to the next, so its
/// URL names the incarnation (when its record was made).
pub fn url(vm: &Vm) -> String {
    format!("static://{}/{}", vm.hostname, vm.configured.timestamp_millis())
}

#[async_trait]
impl Provider for Static {
    fn kind(&self) -> Kind {
        Kind::Static
    }

    /// Nothing to set up.
    async fn setup(&self, _ctx: &Env) -> Result<(), TaskError> {
        Ok(())
    }

    /// Its rules are the Config's own (a list of hostnames): nothing to ask.
    async fn validate(&self, _ctx: &Env, _config: &Config) -> Verdict {
        Verdict::Valid
    }

    /// The machine exists: record it, and watch its bot.
    async fn create(&self, ctx: &Env, cur: Versioned<Vm>) -> Result<Next, TaskError> {
        let placed = Placed {
            url: url(&cur.value),
            created: ctx.now(),
            instance_id: String::new(),
            internal_ip: String::new(),
            external_ip: String::new(),
        };
        crate::lifecycle::created(ctx, cur, placed, true).await.map(|()| Next::Done)
    }

    /// The machine stays: only its bot goes (after this, `delete_bot`).
    async fn remove(&self, _ctx: &Env, _vm: Vm) -> Result<Next, TaskError> {
        Ok(Next::Done)
    }

    /// Nothing is known of the machine but its bot: up.
    async fn check(&self, _ctx: &Env, _vm: &Vm) -> Result<Health, TaskError> {
        Ok(Health::Up("LISTED".into()))
    }

    fn machines_outlive_vms(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
