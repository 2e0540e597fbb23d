//! Which VMs a Config wants: the indexes below its amount (and a rollout's surge), or, for a
//! static pool, the indexes its listed hostnames hold ([`Listed`]), kept in line with the list by
//! every writer of a new revision ([`ConfigRecord::succeed`]), which also carries over the state
//! a record keeps across revisions.

use chrono::{DateTime, Utc};

use super::listed::Listed;
use super::records::{ConfigRecord, Vm};
use super::resources::PoolResource;
use crate::config::providers::ProviderIds;
use crate::config::{Attributes, Config, UpdateMode};
use crate::model::rollout_mark::Rollout;
use crate::model::spot_state::Failover;

impl ConfigRecord {
    /// The one rule for "is this VM still wanted": a static pool wants the indexes of its listed
    /// hostnames, any other pool those below the current amount (plus `max_surge` more while a
    /// rolling update goes on).
    pub fn wants(&self, index: u32) -> bool {
        match self.config.is_static() {
            true => self.listed.slots.contains_key(&index),
            false => !self.let_go.contains(&index) && self.rank(index) < self.slots(),
        }
    }

    /// The indexes it wants, in order.
    pub fn wanted(&self) -> Vec<u32> {
        match self.config.is_static() {
            true => self.listed.slots.keys().copied().collect(),
            false => {
                (0..=u32::MAX).filter(|i| !self.let_go.contains(i)).take(self.slots() as usize).collect()
            }
        }
    }

    /// How many VMs it wants (as many as [`ConfigRecord::wanted`] lists).
    pub fn wanted_len(&self) -> usize {
        match self.config.is_static() {
            true => self.listed.slots.len(),
            false => self.slots() as usize,
        }
    }

    /// True when index `i` is wanted only by a rollout's surge (beyond the amount, for the
    /// rollout's length only; a static pool has none).
    pub fn in_surge(&self, i: u32) -> bool {
        !self.config.is_static()
            && !self.let_go.contains(&i)
            && (self.current_amount..self.slots()).contains(&self.rank(i))
    }

    /// The place of index `i` among the indexes not let go.
    fn rank(&self, i: u32) -> u32 {
        i - self.let_go.range(..i).count() as u32
    }

    /// The indexes a pool with an amount wants: the amount, and the surge of a rollout.
    pub fn slots(&self) -> u32 {
        let surge = if self.rollout.is_some() { self.config.update.max_surge } else { 0 };
        self.current_amount.saturating_add(surge)
    }

    /// The one rule for "is this VM still wanted by its Config": its index is below the
    /// current amount and its machine comes from the Config's provider.
    pub fn keeps(&self, vm: &Vm, providers: &ProviderIds) -> bool {
        self.wants(vm.index) && providers.resolve(&self.config.provider) == providers.resolve(&vm.provider)
    }

    /// The one rule for "is this VM kept warm": its Config keeps its index warm, its machine comes
    /// from the Config's provider, it is neither past its deadline at `now` nor made from older
    /// instance attributes (those go rather than wait warm).
    pub fn keeps_warm(&self, vm: &Vm, providers: &ProviderIds, now: DateTime<Utc>) -> bool {
        self.warm.contains(&vm.index)
            && !self.wants(vm.index)
            && providers.resolve(&self.config.provider) == providers.resolve(&vm.provider)
            && !vm.past_deadline(now)
            && !outdated(&self.config, vm)
    }

    /// Carries over from `old` (the record this one replaces; `None`: a new Config) what a
    /// Config keeps across revisions: its pause and breaker, a rolling update (one starts when
    /// the instance attributes change), a change of provider, and a static pool's slots. Every
    /// writer of a new revision (an import, the API) calls it.
    pub fn succeed(&mut self, old: Option<&ConfigRecord>, providers: &ProviderIds, now: DateTime<Utc>) {
        if let Some(o) = old {
            // What a newer build tracks beside the Config is kept as the rest is.
            self.unknown = o.unknown.clone();
            self.paused = o.paused.clone();
            self.breaker = o.breaker.clone();
            self.spot = o.spot.clone();
            self.let_go = o.let_go.clone();
            self.warm = o.warm.clone();
            self.waking = o.waking.clone();
            self.resources = o.resources.clone();
            self.demand = o.demand.clone().filter(|_| self.config.demand.is_some());
            self.rollout = rollout_of(o, &self.config, now);
            // Marked now when the provider changes (or `o` stood in for a record that did not
            // decode, whose VMs' provider is unknown); a change still going on stays marked.
            let other = providers.resolve(&o.config.provider) != providers.resolve(&self.config.provider);
            self.provider_changed =
                if other || o.revision.is_empty() { Some(now) } else { o.provider_changed };
        }
        self.relist(old);
    }

    /// Brings a static pool's slots and amount in line with its list, given the record it
    /// replaces (`old`; `None`: a new Config).
    pub fn relist(&mut self, old: Option<&ConfigRecord>) {
        let prev = old.map(|o| o.listed.clone()).unwrap_or_default();
        self.listed = match &self.config.machines {
            Some(list) => prev.of(list),
            None => Listed { slots: Default::default(), next: prev.next, unknown: prev.unknown.clone() },
        };
        if self.config.is_static() {
            self.current_amount = u32::try_from(self.listed.slots.len()).unwrap_or(u32::MAX);
        }
    }

    /// The amount it targets at `now`: its list's length for a static pool, else the current
    /// amount (a demand-driven pool's: the target its last reading of the work gives) clamped by
    /// the Config's bounds.
    pub fn amount_at(&self, now: DateTime<Utc>) -> u32 {
        let proposed = match (&self.config.demand, &self.demand) {
            (Some(_), Some(d)) => d.target,
            _ => self.current_amount,
        };
        match self.config.is_static() {
            true => self.current_amount,
            false => self.config.amount.at(proposed, now),
        }
    }

    /// The amount it targets at `now` when no work is waiting or running: a demand-driven
    /// pool's `min_idle` within its bounds, any other pool's [`ConfigRecord::amount_at`].
    pub fn rest_amount(&self, now: DateTime<Utc>) -> u32 {
        match &self.config.demand {
            Some(d) if !self.config.is_static() => self.config.amount.at(d.min_idle, now),
            _ => self.amount_at(now),
        }
    }

    /// How many VMs its warm pool holds at `now`: its size, less the VMs it lends to work above
    /// [`ConfigRecord::rest_amount`] (woken or made for it). At rest the pool is full; a burst
    /// takes VMs out and does not have them made again, as they come back when let go.
    pub fn warm_stock(&self, now: DateTime<Utc>) -> u32 {
        let room = self.config.warm_room();
        room.saturating_sub(self.slots().saturating_sub(self.rest_amount(now)))
    }

    /// How many VMs it makes now: those it wants and those its warm pool keeps.
    pub fn vms_made(&self) -> u32 {
        match self.config.is_static() {
            true => self.listed.slots.len() as u32,
            false => self.slots().saturating_add(self.warm.len() as u32),
        }
    }

    /// Whether it has a VM made under index `i`: one it wants, or one its warm pool keeps.
    pub fn makes(&self, i: u32) -> bool {
        self.wants(i) || self.warm.contains(&i)
    }

    /// The Spot failover in force at `now` (a Config with `spot_failover` only).
    pub fn spot_failover(&self, now: DateTime<Utc>) -> Option<&Failover> {
        self.config.spot_failover.as_ref().and(self.spot.active(now))
    }

    /// Whether the VMs it makes now are Spot (or preemptible), by
    /// [`ConfigRecord::new_vm_attributes`]: its template's are, and no failover is in force.
    pub fn makes_spot(&self, now: DateTime<Utc>) -> bool {
        self.new_vm_attributes("", None, now).0.preemptible()
    }

    /// The one rule for the instance attributes of a VM it makes now in `zone` on `rank` (see
    /// [`Vm::rank`]): its template with the zone filled in and the rank's machine type, made
    /// standard while a Spot failover is in force; and whether it was (the VM's `failover`).
    pub fn new_vm_attributes(&self, zone: &str, rank: Option<u32>, now: DateTime<Utc>) -> (Attributes, bool) {
        let c = &self.config;
        let a = c.attributes_on(zone, rank.unwrap_or(0)).unwrap_or_else(|| c.attributes_in(zone));
        match self.spot_failover(now) {
            Some(_) => (a.standard(), true),
            None => (a, false),
        }
    }
}

// A Config's per-pool resources (see `PoolResource`).
impl ConfigRecord {
    /// Its resource made for `revision`, if any.
    pub fn resource(&self, revision: &str) -> Option<&PoolResource> {
        self.resources.iter().find(|r| r.revision == revision)
    }

    /// Its resource made for `revision`, to change.
    pub fn resource_mut(&mut self, revision: &str) -> Option<&mut PoolResource> {
        self.resources.iter_mut().find(|r| r.revision == revision)
    }

    /// The one rule for which resources go: those of another revision than its own that no VM
    /// is made from (`in_use`: the revisions of its VMs, being made or not; a bulk in flight is
    /// its VMs'), in revision order.
    pub fn unused(&self, in_use: &std::collections::BTreeSet<String>) -> Vec<String> {
        self.resources
            .iter()
            .filter(|r| r.revision != self.revision && !in_use.contains(&r.revision))
            .map(|r| r.revision.clone())
            .collect()
    }

    /// True when its revision's resources are not made yet (a static pool has none to make).
    pub fn needs_resources(&self) -> bool {
        !self.config.is_static()
            && !self.revision.is_empty()
            && self.resource(&self.revision).is_none_or(|r| !r.usable())
    }

    /// True when it holds resources of another revision than its own (a look at its VMs may
    /// let them go).
    pub fn has_old_resources(&self) -> bool {
        self.resources.iter().any(|r| r.revision != self.revision)
    }
}

/// True when `vm` was made from other instance attributes than `c` has now (a VM made standard
/// by a Spot failover is compared with the standard form of them, one made on a fallback rank
/// with those of its rank: it is current while its Config still has that rank's machine type).
pub fn outdated(c: &Config, vm: &Vm) -> bool {
    if c.is_static() {
        return false;
    }
    if !c.zone_names().contains(&vm.zone()) {
        return true;
    }
    let Some(now) = c.attributes_on(vm.zone(), vm.rank.unwrap_or(0)) else { return true };
    vm.attributes != if vm.failover { now.standard() } else { now }
}

/// The rollout mark of a Config record replacing `old` with `new`: a new one when the instance
/// attributes (or zones) change and the update is rolling, else `old`'s (one going on goes on).
fn rollout_of(old: &ConfigRecord, new: &Config, now: DateTime<Utc>) -> Option<Rollout> {
    let o = &old.config;
    let other = o.attributes != new.attributes
        || o.zones != new.zones
        || o.fallback_machine_types != new.fallback_machine_types;
    let rolling = new.update.mode == UpdateMode::Rolling && !new.is_static();
    match (other && rolling && !old.revision.is_empty(), &old.rollout) {
        (true, _) => Some(Rollout { unknown: Default::default(), since: now, updated: 0, outdated: 0 }),
        (false, r) if rolling => r.clone(),
        _ => None,
    }
}
