//! A Config's instance template (LUCI `config.VM`): disks, metadata, network, service accounts,
//! scheduling, Spot, and the rest of what an instance is made from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A disk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Disk {
    /// Source image: `global/images/X` or `projects/P/global/images/X`.
    #[serde(default)]
    pub image: String,
    /// Size in GB.
    #[serde(default)]
    pub size: u64,
    /// `zones/<zone>/diskTypes/<type>` (may use `{{.Zone}}`); empty for the default.
    #[serde(default, rename = "type")]
    pub kind: String,
    /// `SCSI` or `NVME`.
    #[serde(default)]
    pub interface: String,
    /// Hyperdisk only.
    #[serde(default)]
    pub provisioned_iops: Option<u64>,
    /// Hyperdisk only.
    #[serde(default)]
    pub provisioned_throughput: Option<u64>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// A metadata item: exactly one of `from_text: "key:value"` or `from_file: "key:path"` (the path
/// relative to the config file, read at import).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Metadata {
    /// `key:value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_text: Option<String>,
    /// `key:path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_file: Option<String>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Metadata {
    /// A `from_text` item.
    pub fn text(s: impl Into<String>) -> Self {
        Self { unknown: Default::default(), from_text: Some(s.into()), from_file: None }
    }

    /// `key` and `value` of a `from_text` item.
    pub fn pair(&self) -> Option<(&str, &str)> {
        self.from_text.as_deref().map(|s| s.split_once(':').unwrap_or((s, "")))
    }
}

/// An access config of a network interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AccessConfig {
    /// `ONE_TO_ONE_NAT`.
    #[serde(default, rename = "type")]
    pub kind: String,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// A network interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NetworkInterface {
    /// External addresses.
    #[serde(default)]
    pub access_config: Vec<AccessConfig>,
    /// Network, e.g. `global/networks/default`.
    #[serde(default)]
    pub network: String,
    /// Subnetwork.
    #[serde(default)]
    pub subnetwork: String,
    /// `IPV4_ONLY` or `IPV4_IPV6`.
    #[serde(default)]
    pub stack_type: String,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// A service account.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ServiceAccount {
    /// Email (or `default`).
    pub email: String,
    /// OAuth scopes.
    #[serde(default)]
    pub scope: Vec<String>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// A node affinity of sole-tenant scheduling.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NodeAffinity {
    /// Label key.
    pub key: String,
    /// `IN` or `NOT_IN`.
    pub operator: String,
    /// Values.
    #[serde(default)]
    pub values: Vec<String>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// Scheduling options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Scheduling {
    /// Sole-tenant node affinities.
    #[serde(default)]
    pub node_affinity: Vec<NodeAffinity>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// The instance template (LUCI `config.VM`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Attributes {
    /// Disks; the first is the boot disk.
    #[serde(default)]
    pub disk: Vec<Disk>,
    /// Machine type; `{{.Zone}}` is replaced by the zone.
    #[serde(default)]
    pub machine_type: String,
    /// Metadata items.
    #[serde(default)]
    pub metadata: Vec<Metadata>,
    /// Minimum CPU platform.
    #[serde(default)]
    pub min_cpu_platform: String,
    /// Network interfaces.
    #[serde(default)]
    pub network_interface: Vec<NetworkInterface>,
    /// GCP project.
    #[serde(default)]
    pub project: String,
    /// Service accounts.
    #[serde(default)]
    pub service_account: Vec<ServiceAccount>,
    /// Network tags.
    #[serde(default)]
    pub tag: Vec<String>,
    /// Zone.
    #[serde(default)]
    pub zone: String,
    /// Scheduling.
    #[serde(default)]
    pub scheduling: Option<Scheduling>,
    /// Labels.
    #[serde(default)]
    pub label: BTreeMap<String, String>,
    /// Shielded VM: integrity monitoring off.
    #[serde(default)]
    pub disable_integrity_monitoring: bool,
    /// Shielded VM: secure boot on.
    #[serde(default)]
    pub enable_secure_boot: bool,
    /// Shielded VM: vTPM off.
    #[serde(default)]
    pub disable_vtpm: bool,
    /// Confidential VM (implies terminate on maintenance).
    #[serde(default)]
    pub enable_confidential_compute: bool,
    /// Terminate on host maintenance.
    #[serde(default)]
    pub terminate_on_maintenance: bool,
    /// `SPOT` for Spot VMs (cheaper; Compute may preempt them at any time: the VM is then
    /// replaced like any other whose instance stopped); empty or `STANDARD` otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provisioning_model: String,
    /// Legacy preemptible VMs (preempted at any time, at most after 24 h).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preemptible: bool,
    /// What Compute does with a preempted Spot or preemptible VM: `STOP` or `DELETE` (empty:
    /// Compute's default, STOP).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_termination_action: String,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Attributes {
    /// True for Spot and preemptible instances.
    pub fn preemptible(&self) -> bool {
        self.preemptible || self.provisioning_model == "SPOT"
    }

    /// The same instance made standard (what a Spot pool makes while it fails over):
    /// `provisioning_model: STANDARD`, not preemptible, no termination action; the rest as is.
    pub fn standard(&self) -> Attributes {
        Attributes {
            provisioning_model: "STANDARD".to_owned(),
            preemptible: false,
            instance_termination_action: String::new(),
            ..self.clone()
        }
    }
}
