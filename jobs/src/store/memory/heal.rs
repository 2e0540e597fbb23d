//! Derived keys of the wrong type in the in-memory store (planted by tests): reads of one fail
//! with [`StoreError::Healing`] until a rebuild of its scope. (Its indexes are kept with the
//! records under one lock, so they never disagree with them otherwise.)

use super::MemoryStore;
use super::state::State;
use crate::ports::store::{Rebuilt, Scope, StoreError};

impl MemoryStore {
    /// Makes the derived key `part` (`vm:deadline`, `sums:linux`, …) one of the wrong type.
    #[doc(hidden)]
    pub fn plant_broken_key(&self, part: &str) {
        self.lock().broken.insert(part.to_owned());
    }
}

/// The Config a derived key belongs to, if it is one Config's.
fn owner(part: &str) -> Option<&str> {
    part.strip_prefix("vm:cfg:").or_else(|| part.strip_prefix("sums:"))
}

impl State {
    /// `Err(Healing)` while `part` is of the wrong type.
    pub(super) fn healing(&self, part: &str) -> Result<(), StoreError> {
        match self.broken.contains(part) {
            true => Err(StoreError::Healing { key: part.to_owned() }),
            false => Ok(()),
        }
    }

    /// The scopes with a key of the wrong type ([`Scope::All`] alone when a shared one is).
    pub(super) fn heal_scopes(&self) -> Vec<Scope> {
        let mut out: Vec<Scope> = Vec::new();
        for part in &self.broken {
            match owner(part) {
                Some(p) => out.push(Scope::Config(p.to_owned())),
                None => return vec![Scope::All],
            }
        }
        out.dedup();
        out
    }

    /// Drops the scope's keys of the wrong type (their contents are kept right under the lock).
    pub(super) fn rebuild(&mut self, scope: &Scope) -> Rebuilt {
        let replaced: Vec<String> = self
            .broken
            .iter()
            .filter(|part| match scope {
                Scope::All => true,
                Scope::Config(p) => owner(part) == Some(p.as_str()),
            })
            .cloned()
            .collect();
        for part in &replaced {
            self.broken.remove(part);
        }
        let vms = match scope {
            Scope::All => self.vms.len(),
            Scope::Config(p) => self.by_config.get(p).map_or(0, |ids| ids.len()),
        };
        let corrupt = self
            .corrupt_vms
            .keys()
            .filter(|id| match scope {
                Scope::All => true,
                Scope::Config(p) => crate::naming::parse_id(id).is_some_and(|(prefix, _)| prefix == p),
            })
            .cloned()
            .collect();
        Rebuilt { replaced, vms, corrupt, ..Rebuilt::default() }
    }
}
