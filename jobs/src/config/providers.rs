//! What the settings and a Config may say about providers: their types and the fields each
//! reads, the declared ids ([`ProviderIds`]), and the rules of a static pool's list.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::attributes::Attributes;
use super::names::valid_host;
use super::spec::Config;
use super::units::{Amount, ConfigError, Secs};

/// Types of provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Compute Engine instances, through the process's Compute port.
    Gce,
    /// Existing machines listed by hostname (`machines`); none is made or removed.
    Static,
}

impl Kind {
    /// Every type, in order.
    pub const ALL: [Kind; 2] = [Kind::Gce, Kind::Static];

    /// Its name, as declared (`gce`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Gce => "gce",
            Kind::Static => "static",
        }
    }

    /// The JSON Schema of the Config fields this type reads (published with the API's schemas
    /// as `provider-<type>.json`).
    pub fn schema(self) -> serde_json::Value {
        let s = match self {
            Kind::Gce => schemars::schema_for!(GceFields),
            Kind::Static => schemars::schema_for!(StaticFields),
        };
        serde_json::to_value(s).unwrap_or_default()
    }

    /// True when a Config of this type lists its machines (else it has an amount).
    pub fn lists_machines(self) -> bool {
        self == Kind::Static
    }
}

/// One `[providers.<id>]` of the settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declared {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: Kind,
}

/// The id of the provider every deployment has unless its settings say otherwise.
pub const DEFAULT_ID: &str = "gce";

/// Largest length of a provider id.
const MAX_ID: usize = 32;

/// Why a provider id is not one (`None`: it is): lowercase letters, digits and `-`, starting with
/// a letter, at most 32 characters (it goes into status lines and metric labels).
pub fn id_problem(id: &str) -> Option<String> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    (!ok).then(|| {
        format!("{id:?}: a provider id is 1 to {MAX_ID} of a-z, 0-9 and '-', starting with a letter")
    })
}

/// The declared providers' ids and types, and the default one: the pure part of the
/// deployment's providers (which one a Config or VM means, what a Config may name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderIds {
    kinds: BTreeMap<String, Kind>,
    default: String,
}

impl Default for ProviderIds {
    /// One Compute Engine provider, `gce`.
    fn default() -> Self {
        Self { kinds: BTreeMap::from([(DEFAULT_ID.to_owned(), Kind::Gce)]), default: DEFAULT_ID.to_owned() }
    }
}

impl ProviderIds {
    /// The providers `declared` (none declared: the default `gce`). A Config that names no
    /// provider gets the one of type `gce` (or, of several, the one with id `gce`).
    pub fn new(declared: &BTreeMap<String, Declared>) -> Result<Self, String> {
        if declared.is_empty() {
            return Ok(Self::default());
        }
        let mut kinds = BTreeMap::new();
        for (id, d) in declared {
            if let Some(why) = id_problem(id) {
                return Err(format!("[providers.{id}]: {why}"));
            }
            kinds.insert(id.clone(), d.kind);
        }
        let gce: Vec<&String> = kinds.iter().filter(|(_, k)| **k == Kind::Gce).map(|(id, _)| id).collect();
        let default = match gce.as_slice() {
            [one] => (*one).clone(),
            _ if kinds.contains_key(DEFAULT_ID) => DEFAULT_ID.to_owned(),
            _ => String::new(), // every Config must name its provider
        };
        Ok(Self { kinds, default })
    }

    /// These ids and `id` of type `kind` (replacing one of that id).
    pub fn with(mut self, id: &str, kind: Kind) -> Self {
        self.kinds.insert(id.to_owned(), kind);
        self
    }

    /// The type of provider `id` (empty: the default), if declared.
    pub fn kind(&self, id: &str) -> Option<Kind> {
        self.kinds.get(self.resolve(id)).copied()
    }

    /// The declared ids, sorted.
    pub fn ids(&self) -> Vec<&str> {
        self.kinds.keys().map(String::as_str).collect()
    }

    /// The id a Config's `provider` field stands for (empty: the default).
    pub fn resolve<'a>(&'a self, named: &'a str) -> &'a str {
        if named.is_empty() { &self.default } else { named }
    }

    /// True when provider `id` (a VM's) makes static machines (only recorded and released, never
    /// made or deleted): logs call them so.
    pub fn is_static(&self, id: &str) -> bool {
        self.kind(id) == Some(Kind::Static)
    }

    /// Why `config` cannot use a provider here (`None`: it can).
    pub fn problem(&self, config: &Config) -> Option<ConfigError> {
        let id = self.resolve(&config.provider);
        let rule = if id.is_empty() {
            format!(
                "several providers are declared and none is the default: name one of {}",
                self.ids().join(", ")
            )
        } else if !self.kinds.contains_key(id) {
            format!("provider {id:?} is not declared in the settings (declared: {})", self.ids().join(", "))
        } else if let Some(kind) = self.kind(id).filter(|k| k.lists_machines() != config.is_static()) {
            let (field, rule) = match kind.lists_machines() {
                true => (
                    "provider",
                    format!(
                        "provider {id:?} is of type {}: list the pool's hostnames in `machines` instead of an amount",
                        kind.name()
                    ),
                ),
                false => (
                    "machines",
                    format!(
                        "lists static machines, but provider {id:?} is of type {}: name a provider of type static",
                        kind.name()
                    ),
                ),
            };
            return Some(ConfigError { field: format!("{}.{field}", config.prefix), rule });
        } else {
            return None;
        };
        Some(ConfigError { field: format!("{}.provider", config.prefix), rule })
    }
}

/// The part of a Config the Compute Engine provider reads (its published schema).
#[derive(Debug, schemars::JsonSchema)]
#[allow(dead_code)]
pub struct GceFields {
    /// How many instances (bounds and weekly windows).
    pub amount: Amount,
    /// The instance template: zone, project, machine type, disks, network, metadata, labels, …
    pub attributes: Attributes,
    /// How long an instance lives before it is replaced (required).
    pub lifetime: Secs,
}

/// The part of a Config the static provider reads (its published schema).
#[derive(Debug, schemars::JsonSchema)]
#[allow(dead_code)]
pub struct StaticFields {
    /// Hostnames of the existing machines (their bot ids): lowercase DNS names, each listed once
    /// and in no other Config. A hostname keeps its VM id while it is listed.
    pub machines: Vec<String>,
    /// How long a bot runs before it is terminated (after its task) and watched anew; 0 or
    /// absent: never.
    pub lifetime: Option<Secs>,
}

/// The rules of a static Config: a list of valid, distinct hostnames that this service would
/// never make itself; no amount and no instance attributes (nothing is made).
pub fn static_problems(config: &Config, f: &dyn Fn(&str) -> String, out: &mut Vec<ConfigError>) {
    let err = |field: String, rule: &str| ConfigError { field, rule: rule.to_owned() };
    if config.amount != Amount::default() {
        out.push(err(f("amount"), "a static pool lists its machines: remove amount"));
    }
    if config.attributes != Attributes::default() || !config.zones.is_empty() || !config.region.is_empty() {
        out.push(err(f("attributes"), "a static pool's machines exist already: remove attributes"));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, h) in config.machines.iter().flatten().enumerate() {
        let field = f(&format!("machines[{i}]"));
        if !valid_host(h) {
            out.push(err(field, "must be a lowercase hostname: labels of a-z, 0-9 and '-', dot-separated, at most 253 characters"));
        } else if crate::naming::vm_id_of(h).is_some() {
            out.push(err(
                field,
                "has the shape of a hostname this service makes (<prefix>-<index>-xxxx): rename the machine",
            ));
        } else if !seen.insert(h.as_str()) {
            out.push(err(field, "is listed twice"));
        }
    }
}

/// The rule across Configs: a machine belongs to one pool. The first hostname of `config` that
/// one of `others` (the stored Configs; its own prefix is skipped) lists (`None`: none).
pub fn taken<'a>(config: &Config, others: impl IntoIterator<Item = &'a Config>) -> Option<ConfigError> {
    let list = config.machines.as_ref().filter(|l| !l.is_empty())?;
    for o in others.into_iter().filter(|o| o.prefix != config.prefix) {
        let theirs: std::collections::HashSet<&str> =
            o.machines.iter().flatten().map(String::as_str).collect();
        if let Some((i, h)) = list.iter().enumerate().find(|(_, h)| theirs.contains(h.as_str())) {
            let rule = format!("{h} is listed by Config {} too: a machine belongs to one pool", o.prefix);
            return Some(ConfigError { field: format!("{}.machines[{i}]", config.prefix), rule });
        }
    }
    None
}
