//! The contract of a machine source ([`Provider`]) and what it answers: a machine's health, the
//! VM a registering machine proved to be, how a batch of new VMs is sent ([`Batch`]).
//!
//! What differs between providers is asked of the provider, never of its type: how new VMs are
//! sent (one by one, or together by the Config's `bulk_insert`), whether and how a zone is
//! scanned for stopped machines, whether lost VM records are found from the machines, and the
//! per-pool resources with their audit. Each has a default for a provider that needs none.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::catalog::Verdict;
use crate::config::Config;
use crate::config::providers::{Kind, ProviderIds};
use crate::env::Env;
use crate::error::TaskError;
use crate::identity;
use crate::model::parked::Park;
use crate::model::{ConfigRecord, Vm};
use crate::ports::compute::Instance;
use crate::ports::store::Versioned;
use crate::work::{BulkInsert, CreateInstance, Next};

/// What a provider says of a machine it made (asked when its bot looks dead or gone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Up, as far as the provider knows (`status`: its own word, e.g. `RUNNING`).
    Up(String),
    /// Down for good (stopped, preempted, suspended): replace it at once.
    Down(String),
    /// The provider has no such machine.
    Gone,
}

/// The contract of a machine source. Every method may be called by many processes at once and
/// more than once for the same machine; each is idempotent.
#[async_trait]
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// Its type, as declared (`gce`).
    fn kind(&self) -> Kind;

    /// Called once per provider per process before any other method, again after it failed
    /// (the provider's other calls wait for it; other providers do not). Idempotent, and safe
    /// when many processes start at once. By default there is nothing to set up.
    async fn setup(&self, _ctx: &Env) -> Result<(), TaskError> {
        Ok(())
    }

    /// Its own rules for `config` (beyond the rules every Config follows): what the provider
    /// does not offer is [`Verdict::Invalid`] with the field named; [`Verdict::Unknown`] when
    /// it cannot tell now (the Config is stored unverified and checked again). By default it has
    /// no rules of its own.
    async fn validate(&self, _ctx: &Env, _config: &Config) -> Verdict {
        Verdict::Valid
    }

    /// One step towards `vm` having its machine, given the VM as read (it is wanted, not
    /// paused, and has no machine recorded yet: the handler checked). Records what it did on
    /// the VM with a compare-and-set; [`Next::After`] to look again.
    async fn create(&self, ctx: &Env, vm: Versioned<Vm>) -> Result<Next, TaskError>;

    /// One step towards `vm`'s machine being gone, given the VM as read (its machine is the one
    /// the task named, and its removal has started). [`Next::Done`] once it is gone.
    async fn remove(&self, ctx: &Env, vm: Vm) -> Result<Next, TaskError>;

    /// One step towards `vm`'s machine being parked `how` (kept warm: suspended or stopped), given
    /// the VM as read (its Config keeps it warm, its bot runs no task: the handler checked).
    /// Records on the VM with a compare-and-set; [`Next::Done`] once parked. By default a
    /// provider keeps nothing warm (validation refuses a warm pool of one).
    async fn park(&self, _ctx: &Env, _vm: Versioned<Vm>, _how: Park) -> Result<Next, TaskError> {
        Err(TaskError::Invalid("this provider keeps no machine warm".into()))
    }

    /// One step towards `vm`'s parked machine running again, given the VM as read (its Config
    /// wants it again); [`Next::Done`] once it runs, its parked state cleared.
    async fn wake(&self, _ctx: &Env, _vm: Versioned<Vm>) -> Result<Next, TaskError> {
        Err(TaskError::Invalid("this provider keeps no machine warm".into()))
    }

    /// Whether `vm`'s machine is up.
    async fn check(&self, ctx: &Env, vm: &Vm) -> Result<Health, TaskError>;

    /// Checks `proof` (what a machine sends to register; Compute Engine: an instance identity
    /// token for `audience`) and names the VM it proves to be: one of ours, its current
    /// incarnation, not registered yet. Every failure is one [`identity::Refused`], whose
    /// reason the caller keeps to itself. By default a provider takes no registration.
    async fn identify(&self, _ctx: &Env, _proof: &str, _audience: &str) -> Result<Proven, identity::Refused> {
        Err(identity::Refused("this provider takes no registration"))
    }

    /// One step towards the per-pool resources of `rec`'s revision being there (Compute Engine:
    /// its instance template), called when a Config appears or changes and again until done.
    /// Records on the Config record with a compare-and-set; [`Next::After`] to look again while
    /// the provider works. By default a provider keeps none (static machines).
    async fn ensure_resources(&self, _ctx: &Env, _rec: &Versioned<ConfigRecord>) -> Result<Next, TaskError> {
        Ok(Next::Done)
    }

    /// One step towards Config `prefix`'s resources of `revision` being gone, called once no VM
    /// of that revision is left (and it is not the Config's current one): [`Next::Done`] once
    /// gone and forgotten by the Config record. By default there are none.
    async fn remove_resources(&self, _ctx: &Env, _prefix: &str, _revision: &str) -> Result<Next, TaskError> {
        Ok(Next::Done)
    }

    /// How VMs `ids` of Config `rec` (of this provider), just made or waiting for their first
    /// machine, are sent: the one place a provider decides between one by one and together. By
    /// default each goes by its own `create_instance`.
    async fn create_batch(
        &self,
        _ctx: &Env,
        _rec: &ConfigRecord,
        ids: &[String],
    ) -> Result<Batch, TaskError> {
        Ok(Batch::each(ids))
    }

    /// One step of Config `prefix`'s `bulk_insert`: the VMs this provider sent together are
    /// followed; when `own` (the Config, when it is there and this is its provider), its VMs of
    /// this provider that [`Provider::create_batch`] put together are sent, and its others
    /// handed to `create_instance`. `declared` says which provider a VM's id means. By default
    /// nothing is sent together: nothing to do.
    async fn send_together(
        &self,
        _ctx: &Env,
        _declared: &ProviderIds,
        _prefix: &str,
        _own: Option<&ConfigRecord>,
    ) -> Result<Next, TaskError> {
        Ok(Next::Done)
    }

    /// Whether its machines are looked at zone by zone for ones stopped without their bot saying
    /// so (the `inspect_instances` cron pushes a scan of each zone of its Configs, which runs
    /// [`Provider::scan_zone`]). By default not: the bot's health is all there is.
    fn scans_zones(&self) -> bool {
        false
    }

    /// One walk of `zone` in `project`: each machine of a VM's current incarnation found down
    /// (stopped, preempted; not parked on purpose) is replaced at once
    /// (`lifecycle::replace_down`). Only called when [`Provider::scans_zones`].
    async fn scan_zone(&self, _ctx: &Env, _project: &str, _zone: &str) -> Result<Next, TaskError> {
        Ok(Next::Done)
    }

    /// Whether its machines say which VM they are (Compute Engine: our labels), so a VM record
    /// lost with the store (a failover) is looked for among them ([`Provider::lost`]) before VMs
    /// of a Config are made, and not made again beside its machine. By default not.
    fn names_vms(&self) -> bool {
        false
    }

    /// Config `rec`'s machines that have no VM record of their name, each with its zone (every
    /// page): what `making` may adopt back. Only called when [`Provider::names_vms`], once per
    /// store generation.
    async fn lost(&self, _ctx: &Env, _rec: &ConfigRecord) -> Result<Vec<(String, Instance)>, TaskError> {
        Ok(Vec::new())
    }

    /// One audit of the per-pool resources this provider made in `project` (Compute Engine:
    /// instance templates): one that no Config record names and no VM's revision uses is a leak,
    /// removed once it has been one for `leak_grace`. By default there are none.
    async fn audit_resources(&self, _ctx: &Env, _project: &str) -> Result<Next, TaskError> {
        Ok(Next::Done)
    }

    /// Called before a periodic scan of this provider's machines (`inspect_instances`).
    async fn scan_prepare(&self, _ctx: &Env) -> Result<(), TaskError> {
        Ok(())
    }

    /// Called after that scan's tasks were pushed.
    async fn scan_cleanup(&self, _ctx: &Env) -> Result<(), TaskError> {
        Ok(())
    }

    /// True when its machines were there before their VM and stay after it (static): a bot
    /// first seen before the VM was made is then the machine's own, not an earlier
    /// incarnation's (unless Swarming deleted it).
    fn machines_outlive_vms(&self) -> bool {
        false
    }
}

/// A VM a machine proved to be (see [`Provider::identify`]).
#[derive(Debug, Clone)]
pub struct Proven {
    /// The VM, as read.
    pub vm: Versioned<Vm>,
    /// When the proof expires.
    pub expires: DateTime<Utc>,
    /// The provider's id of the machine (Compute Engine: the instance id).
    pub instance_id: String,
}

/// How a batch of a Config's new VMs is sent (see [`Provider::create_batch`]): the tasks to push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Batch {
    /// One by one: a `create_instance` each.
    Each(Vec<CreateInstance>),
    /// Together, by the Config's `bulk_insert` ([`Provider::send_together`]).
    Together(BulkInsert),
}

impl Batch {
    /// Each of `ids` by its own `create_instance`.
    pub fn each(ids: &[String]) -> Self {
        Batch::Each(ids.iter().map(|id| CreateInstance { id: id.clone() }).collect())
    }
}
