//! The Config itself: one pool of VMs as an operator writes it, what it reads and what this
//! service stamps on its instances.

use serde::{Deserialize, Serialize};

use super::attributes::Attributes;
use super::policy::{Breaker, Demand, SpotFailover, Update, UpdateMode, Warm, ZoneWeight};
use super::units::{Amount, Secs};

/// One pool of VMs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Config {
    /// Pool name and the start of every VM id and hostname.
    #[serde(default)]
    pub prefix: String,
    /// How many VMs (none in a static pool).
    #[serde(default, skip_serializing_if = "crate::unknown::is_default")]
    pub amount: Amount,
    /// Instance template (none in a static pool).
    #[serde(default, skip_serializing_if = "crate::unknown::is_default")]
    pub attributes: Attributes,
    /// A multi-zone pool: its zones, each with its share of new VMs (instead of
    /// `attributes.zone`; the project is `attributes.project`). A VM keeps its zone for its
    /// incarnation; quota or stockout in one zone moves creation to the others at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<ZoneWeight>,
    /// A regional pool: its region (`us-central1`), standing for the zones of it the project
    /// lists when the Config is applied, each with weight 1 (they fill `zones`, which may also
    /// list some of them instead, with weights). A pool then spreads over the region and a
    /// stockout or quota refusal in one zone moves creation to the others at once.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub region: String,
    /// Ranked fallbacks: machine types to make VMs of, in order, when `attributes.machine_type`
    /// (rank 0) is refused for want of capacity or quota in a zone (rank 1 is the first listed
    /// here, and so on); empty: none, the zone backs off as a whole. See `config/ranks.rs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback_machine_types: Vec<String>,
    /// How long an instance lives before it is replaced (required).
    #[serde(default)]
    pub lifetime: Secs,
    /// How long a bot may take to connect, or stay dead, before its instance is destroyed (zero:
    /// no limit on connecting, and a dead bot's instance goes at once, as in LUCI).
    #[serde(default)]
    pub timeout: Secs,
    /// Swarming server URL.
    #[serde(default)]
    pub swarming: String,
    /// Groups that own the pool.
    #[serde(default)]
    pub owner: Vec<String>,
    /// The id of the provider its machines come from (`[providers.<id>]` of the settings;
    /// empty: the default, Compute Engine). A change drains the VMs of the old provider.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// A static pool: the hostnames of existing machines, watched instead of made (its provider
    /// is of type `static`; no `amount`, no `attributes`). Removing a hostname drains its bot
    /// (after its task) and deletes it from Swarming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machines: Option<Vec<String>>,
    /// When to stop replacing VMs that fail: the circuit breaker.
    #[serde(default, skip_serializing_if = "crate::unknown::is_default")]
    pub breaker: Breaker,
    /// How VMs made from older instance attributes are replaced after a change.
    #[serde(default, skip_serializing_if = "crate::unknown::is_default")]
    pub update: Update,
    /// A pool sized by the Swarming tasks waiting for it, inside `amount`'s bounds (none: the
    /// amount an operator sets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Demand>,
    /// A warm pool: VMs beyond the target suspended or stopped instead of deleted, resumed
    /// before new ones are made (none: surplus VMs are deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm: Option<Warm>,
    /// A Spot pool's failover to standard VMs while Spot VMs are preempted or refused too often
    /// (none: always Spot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spot_failover: Option<SpotFailover>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Config {
    /// The zones its VMs go to: `zones`, or `attributes.zone`.
    pub fn zone_names(&self) -> Vec<&str> {
        match self.zones.is_empty() {
            true => vec![self.attributes.zone.as_str()],
            false => self.zones.iter().map(|z| z.zone.as_str()).collect(),
        }
    }

    /// The instance attributes of a VM of this Config in `zone`: the template with the zone
    /// filled in (`{{.Zone}}` in the machine and disk types).
    pub fn attributes_in(&self, zone: &str) -> Attributes {
        let mut a = self.attributes.clone();
        a.zone = zone.to_owned();
        a.machine_type = a.machine_type.replace("{{.Zone}}", zone);
        for d in &mut a.disk {
            d.kind = d.kind.replace("{{.Zone}}", zone);
        }
        a
    }

    /// How many indexes its hostnames have room for: those with no more digits than
    /// [`Config::most_indexes`] needs, which validation checked fit an instance name. New indexes
    /// are taken below it while any is free (see `release`; docs/configs.md, "VM ids").
    pub fn index_room(&self) -> u32 {
        10u32.saturating_pow(index_digits(self.most_indexes().max(1)) as u32)
    }

    /// The most indexes it may hold VMs under at once: [`Config::most_vms`], and a rolling
    /// update's surge beyond them.
    pub fn most_indexes(&self) -> u32 {
        let surge = match self.update.mode {
            UpdateMode::Rolling if !self.is_static() => self.update.max_surge,
            _ => 0,
        };
        self.most_vms().saturating_add(surge)
    }

    /// The most VMs it may have at once: its listed machines, or its amount's ceiling (weekly
    /// windows included) and its warm pool.
    pub fn most_vms(&self) -> u32 {
        match &self.machines {
            Some(list) => u32::try_from(list.len()).unwrap_or(u32::MAX),
            None => self.amount.ceiling().max(self.amount.min).saturating_add(self.warm_room()),
        }
    }

    /// How many VMs its warm pool keeps (0: none).
    pub fn warm_room(&self) -> u32 {
        self.warm.as_ref().map_or(0, |w| w.room())
    }

    /// The field a limit on [`Config::most_vms`] names (`amount`, or `warm` when a warm pool
    /// counts), and words for the count (` (N of them kept warm)`).
    pub fn most_vms_field(&self) -> (&'static str, String) {
        match self.warm_room() {
            0 => ("amount", String::new()),
            n => ("warm", format!(" ({n} of them kept warm)")),
        }
    }

    /// True for a static pool (it lists its machines).
    pub fn is_static(&self) -> bool {
        self.machines.is_some()
    }
}

/// The FNV-1a offset basis: where a hash with [`fnv`] starts.
pub const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, 64 bits: a stable content hash (a Config's revision).
pub fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// Largest Config file read (bytes).
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Most Configs one file may hold (YAML documents or `vms` blocks).
pub const MAX_FILE_CONFIGS: usize = 1000;
/// Deepest `[`/`{` nesting a Config file may have (a Config needs about 5).
pub const MAX_NESTING: usize = 32;
/// Most metadata items of a Config.
pub const MAX_METADATA_ITEMS: usize = 10_000;
/// Largest total size of the metadata keys and values, as Compute Engine allows (512 KiB).
pub const MAX_METADATA_BYTES: usize = 512 * 1024;
/// Largest metadata value, as Compute Engine allows (256 KiB).
pub const MAX_METADATA_VALUE: usize = 256 * 1024;

/// Labels this service sets on every instance (and reads back to adopt or audit).
pub mod labels {
    /// The deployment (namespace) that manages the instance.
    pub const DEPLOYMENT: &str = "gce-backend";
    /// The Config prefix.
    pub const CONFIG: &str = "gce-backend-config";
    /// The VM id.
    pub const VM: &str = "gce-backend-vm";
    /// The requestId of the bulkInsert that made the instance (instances made in bulk have no
    /// [`VM`] label: Compute gives them all the same labels).
    pub const BATCH: &str = "gce-backend-batch";
    /// The Config revision an instance template (and what a bulk makes from it) was made for,
    /// as [`revision_label`] writes it.
    pub const REVISION: &str = "gce-backend-revision";

    /// The longest label value (and name) Compute takes.
    const MAX_VALUE: usize = 63;

    /// A revision as a label value and name part: its lowercase letters and digits, at most 63.
    pub fn revision_label(revision: &str) -> String {
        let kept: String = revision
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .take(MAX_VALUE)
            .collect();
        if kept.is_empty() { "0".into() } else { kept }
    }
}

/// Digits of the largest index a pool can have.
pub(super) fn index_digits(max: u32) -> usize {
    max.saturating_sub(1).to_string().len()
}
