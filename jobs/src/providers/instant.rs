//! A provider for tests only, the third type beside Compute Engine and static machines: its
//! machines exist as soon as they are asked for and are gone as soon as they are removed. It
//! asks no Compute, sends nothing together, scans no zone, keeps no per-pool resource and finds
//! no lost record: every answer beyond the few below is the contract's default. Its Configs are
//! of Compute Engine's shape (an amount, instance attributes), so it is declared of that type.

use async_trait::async_trait;

use super::contract::{Health, Provider};
use crate::config::providers::Kind;
use crate::env::Env;
use crate::error::TaskError;
use crate::model::{Placed, Vm};
use crate::ports::store::Versioned;
use crate::work::Next;

/// The instant provider.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Instant;

/// The URL of `vm`'s machine (one per incarnation: its hostname is new each time).
pub(super) fn url(vm: &Vm) -> String {
    format!("instant://{}", vm.hostname)
}

#[async_trait]
impl Provider for Instant {
    /// Its Configs have an amount, as Compute Engine's do.
    fn kind(&self) -> Kind {
        Kind::Gce
    }

    /// The machine is there at once: recorded, and its bot watched.
    async fn create(&self, ctx: &Env, cur: Versioned<Vm>) -> Result<Next, TaskError> {
        let placed = Placed::known_by_url(url(&cur.value), ctx.now());
        crate::fleet::lifecycle::created(ctx, cur, placed, false).await.map(|()| Next::Done)
    }

    /// Gone at once.
    async fn remove(&self, _ctx: &Env, _vm: Vm) -> Result<Next, TaskError> {
        Ok(Next::Done)
    }

    /// Up until its removal has started, gone from then on (nothing else is known of it).
    async fn check(&self, _ctx: &Env, vm: &Vm) -> Result<Health, TaskError> {
        Ok(match vm.destroying {
            Some(_) => Health::Gone,
            None => Health::Up("INSTANT".into()),
        })
    }
}

#[cfg(test)]
mod tests;
