//! A static pool's slots: which VM index each listed hostname holds.

use serde::{Deserialize, Serialize};

/// The VM indexes of a static pool's hostnames. A hostname keeps its index while it is listed,
/// whatever else the list gains, loses or reorders; a new one takes the next index never used,
/// so a VM of a removed hostname (still draining) is never taken for another machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Listed {
    /// Hostname by VM index.
    pub slots: std::collections::BTreeMap<u32, String>,
    /// The next index to give.
    pub next: u32,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Listed {
    /// The slots of `machines`, given the previous ones.
    pub fn of(&self, machines: &[String]) -> Listed {
        let listed: std::collections::HashSet<&str> = machines.iter().map(String::as_str).collect();
        let mut out = Listed {
            unknown: self.unknown.clone(),
            slots: self
                .slots
                .iter()
                .filter(|(_, h)| listed.contains(h.as_str()))
                .map(|(i, h)| (*i, h.clone()))
                .collect(),
            next: self.next,
        };
        let held: std::collections::HashSet<String> = out.slots.values().cloned().collect();
        for h in machines.iter().filter(|h| !held.contains(*h)) {
            out.slots.insert(out.next, h.clone());
            out.next = out.next.saturating_add(1);
        }
        out
    }
}
