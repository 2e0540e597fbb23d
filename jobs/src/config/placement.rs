//! Where a Config's VMs go: one zone (`attributes.zone`), zones with weights (`zones`) or a
//! region (`region`, the project's zones in it); the rules they follow, and a region's zones
//! filled in from the project's list.

use super::names::valid_gce_name;
use super::policy::{MAX_ZONES, ZoneWeight};
use super::spec::Config;
use super::units::{ConfigError, err};

/// True for a region's name, as Compute Engine writes them (`us-central1`, `europe-west4`):
/// a name with a dash that ends in a digit.
pub fn valid_region(name: &str) -> bool {
    valid_gce_name(name) && name.contains('-') && name.ends_with(|c: char| c.is_ascii_digit())
}

/// The region a zone is in (`us-central1-b` → `us-central1`).
pub fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(region, _)| region)
}

impl Config {
    /// A regional Config whose operator lists no zones: the project's zones in its region fill
    /// them (each with weight 1, marked `from_region`) whenever it is applied, in place of any
    /// filled in before (a Config read back and applied again takes up the region's zones anew).
    pub fn needs_region_zones(&self) -> bool {
        !self.region.is_empty() && self.zones.iter().all(|z| z.from_region)
    }

    /// Fills `zones` with the zones of its region among `known` (a project's, as `zones.list`
    /// names them), each with weight 1, when its operator lists none; the error names `region`
    /// when the project has none there.
    pub fn fill_region(&mut self, known: &[String]) -> Result<(), ConfigError> {
        if !self.needs_region_zones() {
            return Ok(());
        }
        let mut zones: Vec<&String> = known.iter().filter(|z| region_of(z) == self.region).collect();
        zones.sort();
        if zones.is_empty() {
            return Err(err(
                format!("{}.region", self.prefix),
                format!(
                    "project {} has no zones in region {} (zones.list)",
                    self.attributes.project, self.region
                ),
            ));
        }
        self.zones = zones
            .into_iter()
            .map(|z| ZoneWeight {
                unknown: Default::default(),
                zone: z.clone(),
                weight: 1,
                from_region: true,
            })
            .collect();
        Ok(())
    }

    /// The rules of where its VMs go: `attributes.zone`, or `zones`, or `region` (whose zones,
    /// if listed too, are in it).
    pub(super) fn check_placement(&self, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
        let zone = &self.attributes.zone;
        let regional = !self.region.is_empty();
        if regional && !valid_region(&self.region) {
            out.push(err(f("region"), format!("{:?} is not a region name like us-central1", self.region)));
        } else if regional {
            // Zones filled in from a region before are filled in again from this one.
            let written = self.zones.iter().enumerate().filter(|(_, z)| !z.from_region);
            for (i, z) in written.filter(|(_, z)| region_of(&z.zone) != self.region) {
                out.push(err(
                    f(&format!("zones[{i}].zone")),
                    format!("{} is not in region {}", z.zone, self.region),
                ));
            }
        }
        if !zone.is_empty() && (regional || !self.zones.is_empty()) {
            out.push(err(
                f("attributes.zone"),
                "a pool with zones or a region names its zones there only: remove it",
            ));
        }
        if !self.zones.is_empty() && !self.needs_region_zones() {
            self.check_zones(f, out);
        } else if !regional && zone.is_empty() {
            out.push(err(f("attributes.zone"), "is required (or zones or region, for a pool over zones)"));
        } else if !regional && !valid_gce_name(zone) {
            out.push(err(f("attributes.zone"), format!("{zone:?} is not a zone name like us-central1-b")));
        }
    }

    /// The rules of a multi-zone pool's `zones`.
    fn check_zones(&self, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
        /// Weights are shares: 1000 tells apart any split a pool can make.
        const MAX_WEIGHT: u32 = 1000;
        if self.zones.len() > MAX_ZONES {
            out.push(err(f("zones"), format!("{} zones; at most {MAX_ZONES}", self.zones.len())));
        }
        if self.zones.iter().all(|z| z.weight == 0) {
            out.push(err(f("zones"), "at least one zone needs a weight above 0"));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, z) in self.zones.iter().enumerate() {
            if !valid_gce_name(&z.zone) {
                out.push(err(
                    f(&format!("zones[{i}].zone")),
                    format!("{:?} is not a zone name like us-central1-b", z.zone),
                ));
            } else if !seen.insert(z.zone.as_str()) {
                out.push(err(f(&format!("zones[{i}].zone")), "is listed twice"));
            }
            if z.weight > MAX_WEIGHT {
                out.push(err(
                    f(&format!("zones[{i}].weight")),
                    format!("{}; at most {MAX_WEIGHT}", z.weight),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
