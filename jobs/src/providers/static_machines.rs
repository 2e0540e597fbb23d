//! The static provider (seed 000's `static` type, seed 004's `StaticResources`): a Config lists
//! existing machines by hostname (`machines`) instead of an amount. Nothing is made or removed:
//! a VM of a listed hostname is "created" by recording the machine at once, its bot is watched
//! like any other (connected, dead, terminated at the deadline when the Config has a lifetime),
//! and a hostname taken off the list is drained: its bot finishes its task, is terminated, and
//! is deleted from Swarming with the VM record.

use async_trait::async_trait;

use super::contract::{Health, Provider};
use crate::config::providers::Kind;
use crate::env::Env;
use crate::error::TaskError;
use crate::model::{Placed, Vm};
use crate::ports::store::Versioned;
use crate::work::Next;

/// The static provider.
#[derive(Debug, Clone, Copy, Default)]
pub struct Static;

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

    /// The machine exists: record it, and watch its bot.
    async fn create(&self, ctx: &Env, cur: Versioned<Vm>) -> Result<Next, TaskError> {
        let placed = Placed::known_by_url(url(&cur.value), ctx.now());
        crate::fleet::lifecycle::created(ctx, cur, placed, true).await.map(|()| Next::Done)
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
