//! A Config's ranked machine types: `attributes.machine_type` is rank 0 (the preferred one), each
//! of `fallback_machine_types` the next rank in order; the instance attributes of a rank, and
//! the rules the list follows. Which rank a new VM gets is `crate::ranks`'s.

use super::attributes::Attributes;
use super::names::resource_path;
use super::spec::Config;
use super::units::{ConfigError, err};

/// Most ranks a Config may have (its machine type and its fallbacks).
pub const MAX_RANKS: usize = 5;

/// The machine type's name without its path (`zones/{{.Zone}}/machineTypes/n2-standard-2` →
/// `n2-standard-2`): what a backoff of it and status name.
pub fn short_machine_type(machine_type: &str) -> &str {
    machine_type.rsplit('/').next().unwrap_or(machine_type)
}

impl Config {
    /// True when it lists fallback machine types: a refusal for want of capacity or quota then
    /// backs off one rank's machine type in the zone, not the whole zone.
    pub fn has_ranks(&self) -> bool {
        !self.fallback_machine_types.is_empty()
    }

    /// How many ranks it has: 1, and one per fallback machine type.
    pub fn ranks(&self) -> u32 {
        1 + self.fallback_machine_types.len() as u32
    }

    /// The machine type of `rank` as written (`None`: no such rank).
    pub fn machine_type_of(&self, rank: u32) -> Option<&str> {
        match rank {
            0 => Some(&self.attributes.machine_type),
            r => self.fallback_machine_types.get(r as usize - 1).map(String::as_str),
        }
    }

    /// The instance attributes of a VM of this Config in `zone` on `rank`: those of the zone
    /// ([`Config::attributes_in`]) with the rank's machine type (`{{.Zone}}` filled in); `None`
    /// for a rank it does not have.
    pub fn attributes_on(&self, zone: &str, rank: u32) -> Option<Attributes> {
        let mut a = self.attributes_in(zone);
        a.machine_type = self.machine_type_of(rank)?.replace("{{.Zone}}", zone);
        Some(a)
    }

    /// The rules of `fallback_machine_types`: a pool whose machines are made, at most
    /// [`MAX_RANKS`] ranks in all, each a machine type written as `attributes.machine_type` is,
    /// none the same as another (or as `attributes.machine_type`).
    pub(super) fn check_ranks(&self, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
        let list = &self.fallback_machine_types;
        if list.is_empty() {
            return;
        }
        if self.is_static() {
            out.push(err(f("fallback_machine_types"), "a static pool lists its machines: it makes none"));
            return;
        }
        if list.len() >= MAX_RANKS {
            out.push(err(
                f("fallback_machine_types"),
                format!(
                    "{} machine types; at most {} after attributes.machine_type",
                    list.len(),
                    MAX_RANKS - 1
                ),
            ));
        }
        let mut seen = vec![short_machine_type(&self.attributes.machine_type)];
        for (i, t) in list.iter().enumerate() {
            let field = f(&format!("fallback_machine_types[{i}]"));
            if t.is_empty() {
                out.push(err(field, "must name a machine type"));
            } else if let Err(why) = resource_path(t) {
                out.push(err(field, why));
            } else if seen.contains(&short_machine_type(t)) {
                out.push(err(
                    field,
                    format!("{} is listed twice (attributes.machine_type is rank 0)", short_machine_type(t)),
                ));
            } else {
                seen.push(short_machine_type(t));
            }
        }
    }
}
