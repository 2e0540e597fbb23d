//! The contract of a machine source ([`Provider`]) and what it answers: a machine's health, the
//! VM a registering machine proved to be.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::catalog::Verdict;
use crate::config::Config;
use crate::config::providers::Kind;
use crate::env::Env;
use crate::error::TaskError;
use crate::identity;
use crate::model::parked::Park;
use crate::model::{ConfigRecord, Vm};
use crate::ports::store::Versioned;
use crate::work::Next;

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
    /// when many processes start at once.
    async fn setup(&self, ctx: &Env) -> Result<(), TaskError>;

    /// Its own rules for `config` (beyond the rules every Config follows): what the provider
    /// does not offer is [`Verdict::Invalid`] with the field named; [`Verdict::Unknown`] when
    /// it cannot tell now (the Config is stored unverified and checked again).
    async fn validate(&self, ctx: &Env, config: &Config) -> Verdict;

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
