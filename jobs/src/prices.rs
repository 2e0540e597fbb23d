//! Prices of what a VM uses, from Compute Engine's public SKUs (the Cloud Billing Catalog API's
//! `services/6F81-5844-456A/skus`, or the dated snapshot in `config/prices/`): a machine type's
//! vCPUs and memory at its family's rates in its region, standard or Spot; its disks per GiB; a
//! suspended VM's saved memory and device state. What cannot be priced says why: never free.
//!
//! Pure rules: the SKUs come in, rates per hour go out. Which SKU is what is read from its
//! category, usage type and description, as Google words them (`E2 Instance Core running in
//! Americas`, `Spot Preemptible N2 Instance Ram running in EMEA`, `SSD backed PD Capacity`).

pub mod book;
mod shapes;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use shapes::{Shape, Unpriced, shape};

/// Hours in a month, as Google converts a per-month price (`GiBy.mo`) to hours.
pub const HOURS_PER_MONTH: f64 = 730.0;

/// One SKU as the Catalog API answers it (the fields read here; the rest ignored).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sku {
    /// Its id (`CF4E-A0C7-E3BF`).
    pub sku_id: String,
    /// What it is, in Google's words.
    pub description: String,
    /// Its family, group and usage type.
    pub category: Category,
    /// The regions it prices.
    #[serde(default)]
    pub service_regions: Vec<String>,
    /// Its prices over time; the first is in force.
    #[serde(default)]
    pub pricing_info: Vec<PricingInfo>,
}

/// A SKU's category.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Category {
    /// `Compute`, `Storage`, …
    #[serde(default)]
    pub resource_family: String,
    /// `CPU`, `RAM`, `N1Standard`, `SSD`, `PDStandard`, …
    #[serde(default)]
    pub resource_group: String,
    /// `OnDemand`, `Preemptible` (Spot), `Commit1Yr`, …
    #[serde(default)]
    pub usage_type: String,
}

/// A SKU's price at one time.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PricingInfo {
    /// How usage is measured and priced.
    pub pricing_expression: PricingExpression,
}

/// A unit and its tiered rates.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PricingExpression {
    /// `h`, `GiBy.h`, `GiBy.mo`.
    pub usage_unit: String,
    /// Rates from each tier's start; the first tier's is the list price.
    #[serde(default)]
    pub tiered_rates: Vec<TieredRate>,
}

/// One tier's rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TieredRate {
    /// Usage where the tier starts.
    #[serde(default)]
    pub start_usage_amount: f64,
    /// The price of one unit.
    pub unit_price: Money,
}

/// An amount of money, as Google writes it: whole units (a string) and nanos.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Money {
    /// `USD`.
    #[serde(default)]
    pub currency_code: String,
    /// Whole units, an int64 as a string.
    #[serde(default)]
    pub units: String,
    /// Billionths of a unit.
    #[serde(default)]
    pub nanos: i64,
}

/// What a rate prices.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Meter {
    /// A vCPU of a family (`e2`, `n1`, …), per hour; `custom`: of its custom machine types.
    Core {
        /// Its family.
        family: String,
        /// Of the family's custom machine types.
        custom: bool,
    },
    /// A GiB of memory of a family, per hour.
    Ram {
        /// Its family.
        family: String,
        /// Of the family's custom machine types.
        custom: bool,
    },
    /// A GiB of a disk type (`pd-standard`, `pd-balanced`, `pd-ssd`), per hour.
    Disk(String),
    /// A GiB of a suspended VM's saved memory and device state, per hour.
    Suspended,
}

/// USD per unit-hour by (meter, Spot, region), from a set of SKUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rates {
    by: BTreeMap<(Meter, bool, String), f64>,
}

impl Rates {
    /// The rates of the SKUs it understands (USD, on demand or Spot); others are left out.
    pub fn from_skus(skus: &[Sku]) -> Rates {
        let mut by = BTreeMap::new();
        for sku in skus {
            let Some((meter, spot)) = meter(sku) else { continue };
            let Some(rate) = per_hour(sku) else { continue };
            for region in &sku.service_regions {
                by.insert((meter.clone(), spot, region.clone()), rate);
            }
        }
        Rates { by }
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.by.is_empty()
    }

    fn rate(&self, meter: Meter, spot: bool, region: &str) -> Result<f64, Unpriced> {
        let what = format!("{meter:?}{} in {region}", if spot { " (Spot)" } else { "" });
        self.by
            .get(&(meter, spot, region.to_owned()))
            .copied()
            .ok_or_else(|| Unpriced(format!("no SKU for {what}")))
    }

    /// A running VM of `machine_type` (a name or a URL ending in one) in `region`, per hour.
    pub fn machine_per_hour(&self, machine_type: &str, region: &str, spot: bool) -> Result<f64, Unpriced> {
        let s = shape(machine_type)?;
        let custom = s.custom && s.family != "e2";
        let core = self.rate(Meter::Core { family: s.family.clone(), custom }, spot, region)?;
        let ram = self.rate(Meter::Ram { family: s.family.clone(), custom }, spot, region)?;
        Ok(s.vcpus * core + s.memory_gib * ram)
    }

    /// `gib` of disk type `disk_type` (a name or a URL ending in one; empty: `pd-standard`) in
    /// `region`, per hour.
    pub fn disk_per_hour(&self, disk_type: &str, gib: f64, region: &str) -> Result<f64, Unpriced> {
        let name = match disk_type.rsplit('/').next().unwrap_or_default() {
            "" => "pd-standard",
            n => n,
        };
        Ok(gib * self.rate(Meter::Disk(name.to_owned()), false, region)?)
    }

    /// A suspended VM of `machine_type` in `region` (its memory saved), per hour; its disks are
    /// priced apart.
    pub fn suspended_per_hour(&self, machine_type: &str, region: &str) -> Result<f64, Unpriced> {
        Ok(shape(machine_type)?.memory_gib * self.rate(Meter::Suspended, false, region)?)
    }
}

/// What `sku` prices, and whether it is Spot; `None` for a SKU this does not price.
fn meter(sku: &Sku) -> Option<(Meter, bool)> {
    let spot = match sku.category.usage_type.as_str() {
        "OnDemand" => false,
        "Preemptible" => true,
        _ => return None,
    };
    let d = sku.description.as_str();
    let d = d.strip_prefix("Spot Preemptible ").or_else(|| d.strip_prefix("Preemptible ")).unwrap_or(d);
    let disk = |name: &str| Some((Meter::Disk(name.to_owned()), spot));
    match d {
        "Storage PD Capacity" => return disk("pd-standard"),
        "Balanced PD Capacity" => return disk("pd-balanced"),
        "SSD backed PD Capacity" => return disk("pd-ssd"),
        _ if d.starts_with("Suspended VM memory") => return Some((Meter::Suspended, spot)),
        _ => {}
    }
    // `<FAMILY> [AMD] [Predefined|Custom] Instance Core|Ram running in <place>`.
    let words: Vec<&str> = d.split(' ').collect();
    let at = words.iter().position(|w| *w == "Instance")?;
    let family = words.first()?.to_ascii_lowercase();
    let custom = words[..at].contains(&"Custom");
    if family == "custom" || !family.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    match words.get(at + 1) {
        Some(&"Core") => Some((Meter::Core { family, custom }, spot)),
        Some(&"Ram") => Some((Meter::Ram { family, custom }, spot)),
        _ => None,
    }
}

/// The first tier's price of `sku` in USD per unit-hour (a per-month unit over
/// [`HOURS_PER_MONTH`]); `None` when it is in another currency or unit.
fn per_hour(sku: &Sku) -> Option<f64> {
    let e = &sku.pricing_info.first()?.pricing_expression;
    let first = e.tiered_rates.iter().find(|t| t.start_usage_amount == 0.0).or(e.tiered_rates.first())?;
    let m = &first.unit_price;
    if !m.currency_code.is_empty() && m.currency_code != "USD" {
        return None;
    }
    let units: f64 = if m.units.is_empty() { 0.0 } else { m.units.parse().ok()? };
    let price = units + m.nanos as f64 / 1e9;
    match e.usage_unit.as_str() {
        "h" | "GiBy.h" => Some(price),
        "GiBy.mo" => Some(price / HOURS_PER_MONTH),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
