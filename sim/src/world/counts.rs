//! Counts of the world by state, kept up to date at every transition so `/sim/summary` answers
//! without scanning: instances by status (and deleting), overall and per zone; bots by state;
//! operations by status; instances by status per Config (the name's prefix, see
//! [`crate::names::config_of`]). [`World::scan_counts`] recounts by scanning, for checks. Only the
//! world's methods change instances, bots and operations (the maps are public to read).

use std::collections::BTreeMap;

use super::model::{Bot, Instance, OpStatus, Status};

/// Instances by status, and those being deleted (whatever their status).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InstanceCounts {
    /// Every instance.
    pub total: u64,
    /// By [`Status`], in its order (PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED,
    /// SUSPENDING, SUSPENDED).
    pub by_status: [u64; 7],
    /// Being deleted.
    pub deleting: u64,
}

impl InstanceCounts {
    fn add(&mut self, (status, deleting): (Status, bool), n: i64) {
        let bump = |c: &mut u64| *c = step(*c, n);
        bump(&mut self.total);
        bump(&mut self.by_status[status as usize]);
        if deleting {
            bump(&mut self.deleting);
        }
    }
}

/// A bot's state as the summary counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BotState {
    /// Connected and alive.
    Alive,
    /// Alive, with a TerminateBot pending.
    Terminating,
    /// Dead (its instance went, it stopped pinging, or it was killed).
    Dead,
    /// Dead because of TerminateBot.
    Terminated,
    /// Deleted from the server.
    Deleted,
}

impl BotState {
    /// Every state, in the order of [`Counts::bots`].
    pub const ALL: [BotState; 5] =
        [BotState::Alive, BotState::Terminating, BotState::Dead, BotState::Terminated, BotState::Deleted];

    /// The state of `b`.
    pub fn of(b: &Bot) -> Self {
        match (b.deleted, b.dead_at.is_some()) {
            (true, _) => BotState::Deleted,
            (false, true) if b.termination_task_id.is_some() => BotState::Terminated,
            (false, true) => BotState::Dead,
            (false, false) if b.termination.is_some() => BotState::Terminating,
            (false, false) => BotState::Alive,
        }
    }

    /// Its name in `/sim/summary`.
    pub fn name(self) -> &'static str {
        match self {
            BotState::Alive => "alive",
            BotState::Terminating => "terminating",
            BotState::Dead => "dead",
            BotState::Terminated => "terminated",
            BotState::Deleted => "deleted",
        }
    }
}

/// Counts of the world.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Instances.
    pub instances: InstanceCounts,
    /// Instances per zone (zones without instances are absent).
    pub zones: BTreeMap<String, InstanceCounts>,
    /// Instances by [`Status`] per Config (Configs without instances are absent).
    pub configs: BTreeMap<String, [u64; 7]>,
    /// Bots by [`BotState`], in the order of [`BotState::ALL`].
    pub bots: [u64; 5],
    /// Operations remembered, by [`OpStatus`] (PENDING, RUNNING, DONE).
    pub operations: [u64; 3],
    /// Operations DONE with an error.
    pub failed_operations: u64,
}

impl Counts {
    /// The instance `name` in `zone` changed from `before` to `after` (`None`: absent).
    pub(super) fn instance(
        &mut self,
        zone: &str,
        name: &str,
        before: Option<(Status, bool)>,
        after: Option<(Status, bool)>,
    ) {
        if before == after {
            return;
        }
        self.config(name, before.map(|b| b.0), after.map(|a| a.0));
        if let Some(b) = before {
            self.instances.add(b, -1);
            if let Some(z) = self.zones.get_mut(zone) {
                z.add(b, -1);
                if z.total == 0 {
                    self.zones.remove(zone);
                }
            }
        }
        if let Some(a) = after {
            self.instances.add(a, 1);
            match self.zones.get_mut(zone) {
                Some(z) => z.add(a, 1),
                None => {
                    let mut z = InstanceCounts::default();
                    z.add(a, 1);
                    self.zones.insert(zone.to_owned(), z);
                }
            }
        }
    }

    /// The instance `name`'s status changed from `before` to `after`, counted for its Config.
    fn config(&mut self, name: &str, before: Option<Status>, after: Option<Status>) {
        if before == after {
            return;
        }
        let config = crate::names::config_of(name);
        if let Some(b) = before
            && let Some(c) = self.configs.get_mut(config)
        {
            c[b as usize] = step(c[b as usize], -1);
            if c.iter().all(|n| *n == 0) {
                self.configs.remove(config);
            }
        }
        if let Some(a) = after {
            self.configs.entry(config.to_owned()).or_default()[a as usize] += 1;
        }
    }

    /// A bot changed from `before` to `after` (`None`: absent).
    pub(super) fn bot(&mut self, before: Option<BotState>, after: Option<BotState>) {
        if let Some(b) = before {
            self.bots[b as usize] = step(self.bots[b as usize], -1);
        }
        if let Some(a) = after {
            self.bots[a as usize] += 1;
        }
    }

    /// An operation changed from `before` to `after` (`None`: absent); `failed` when it is (or
    /// was) DONE with an error.
    pub(super) fn operation(&mut self, before: Option<OpStatus>, after: Option<OpStatus>, failed: bool) {
        if let Some(b) = before {
            self.operations[b as usize] = step(self.operations[b as usize], -1);
            if failed && b == OpStatus::Done {
                self.failed_operations = step(self.failed_operations, -1);
            }
        }
        if let Some(a) = after {
            self.operations[a as usize] += 1;
            if failed && a == OpStatus::Done {
                self.failed_operations += 1;
            }
        }
    }
}

/// `c + n`: a count never goes below zero (tests catch it; a running simulator, which changes the
/// world under its lock without panicking paths, stays at zero).
fn step(c: u64, n: i64) -> u64 {
    debug_assert!(c.checked_add_signed(n).is_some(), "a count below zero: {c} {n:+}");
    c.saturating_add_signed(n)
}

/// What an instance is counted as.
pub(super) fn class(i: &Instance) -> (Status, bool) {
    (i.status, i.deleting)
}
