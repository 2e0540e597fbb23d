//! The records themselves: Config records, VMs and their incarnations, pauses.
//! (Bot observations: `model/bots.rs`; what is kept per Config beside its record: `model/kept.rs`.)

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::listed::Listed;
use crate::config::{Attributes, Config};
use crate::model::breaker_state::BreakerState;
use crate::model::rollout_mark::Rollout;
use crate::model::spot_state::SpotState;

/// The `source` of a Config made over the operator API. File sources are file names, which
/// always end `.yaml`, `.yml` or `.json` (`import_configs` lists no other file), so no file can
/// be taken for it.
pub const API_SOURCE: &str = "api";

/// A pause: who, why, since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pause {
    /// Who paused (the API token's name).
    pub by: String,
    /// Why.
    pub reason: String,
    /// Since when.
    pub at: DateTime<Utc>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// A Config as stored: the operator's Config plus what the service tracks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfigRecord {
    /// Its format: a build acts on it only if it reads this format (see `model::format`).
    #[serde(default)]
    pub format: super::Format,
    /// The Config (durations in seconds, metadata resolved).
    pub config: Config,
    /// Content hash of the file it came from.
    pub revision: String,
    /// The amount the service targets now; kept across imports.
    pub current_amount: u32,
    /// Where it came from: the name of its Config file in the configs directory (the file that
    /// holds a prefix keeps it), or [`API_SOURCE`] for a Config made over the API.
    #[serde(default)]
    pub source: String,
    /// When its file was first found gone; it is deleted `config_delete_grace` later unless the
    /// file comes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orphaned: Option<DateTime<Utc>>,
    /// While orphaned: when it will be deleted (the grace in force when it was orphaned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_at: Option<DateTime<Utc>>,
    /// True once its zone and disk types were checked against Compute Engine (false while
    /// Compute could not be asked; the check is repeated on every import until it can).
    #[serde(default)]
    pub verified: bool,
    /// Set while this Config is paused: no VM is created or replaced (see `Env::paused`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// When its provider last changed, kept until no VM of another provider is left
    /// (`expand_config` drains them a few at a time; see `expand_config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_changed: Option<DateTime<Utc>>,
    /// A static pool's slots: the VM index each listed hostname has (see [`Listed`]).
    #[serde(default, skip_serializing_if = "crate::unknown::is_default")]
    pub listed: Listed,
    /// Set while a rolling update replaces VMs made from older instance attributes (see
    /// `rollout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Its circuit breaker: failures in a row, and whether it is open (see `breaker`).
    #[serde(default, skip_serializing_if = "crate::unknown::is_default")]
    pub breaker: BreakerState,
    /// Indexes let go below its highest wanted one, so the VMs it keeps are the busy ones
    /// (see `release`): it wants the first `current_amount` indexes not in this set.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub let_go: std::collections::BTreeSet<u32>,
    /// A demand-driven Config's last reading of its work and the target that follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<crate::model::demand_reading::DemandState>,
    /// Indexes kept warm (a warm pool's parked VMs, not wanted; see `release`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub warm: std::collections::BTreeSet<u32>,
    /// Indexes woken from the warm pool whose VM has not finished waking: each look at the
    /// Config asks `park_vm` again until it has.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub waking: std::collections::BTreeSet<u32>,
    /// A Spot pool's failover: its recent preemptions and refusals, the failover in force, and
    /// totals (see `spot`).
    #[serde(default, skip_serializing_if = "crate::unknown::is_default")]
    pub spot: SpotState,
    /// Its provider's per-pool resources (Compute Engine: an instance template per revision),
    /// kept across revisions until removed (see `PoolResource`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<super::resources::PoolResource>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl super::Formatted for ConfigRecord {
    fn format(&self) -> super::Format {
        self.format
    }
}

impl super::Formatted for Vm {
    fn format(&self) -> super::Format {
        self.format
    }
}

impl ConfigRecord {
    /// True when a Config file holds it (false for a Config made over the API).
    pub fn from_file(&self) -> bool {
        self.source != API_SOURCE
    }
}

/// One slot of a Config (`<prefix>-<index>`) and its current incarnation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Vm {
    /// Its format: a build acts on it only if it reads this format (see `model::format`).
    #[serde(default)]
    pub format: super::Format,
    /// `<prefix>-<index>`.
    pub id: String,
    /// Config prefix.
    pub config: String,
    /// Index in the pool.
    pub index: u32,
    /// Instance name and bot id: `<prefix>-<index>-<4 chars>`, new for each incarnation.
    pub hostname: String,
    /// The template with `{{.Zone}}` replaced; never changed after creation.
    pub attributes: Attributes,
    /// Swarming server URL.
    pub swarming: String,
    /// Seconds this incarnation lives (the Config's lifetime plus up to 10 %).
    pub lifetime: u64,
    /// Seconds a bot may take to connect or stay dead (0: no connect limit; dead goes at once).
    pub timeout: u64,
    /// Config revision it was made from.
    pub revision: String,
    /// The id of the provider that makes its machine (empty: the default provider; records
    /// written before providers were declared).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// When this record was made.
    pub configured: DateTime<Utc>,
    /// Insert attempt; a new attempt (new requestId) follows an insert that failed for good.
    #[serde(default)]
    pub insert_attempt: u32,
    /// When an insert was first sent for this attempt.
    #[serde(default)]
    pub insert_sent: Option<DateTime<Utc>>,
    /// The Compute operation this incarnation waits for: its insert's until the instance is
    /// made, then its delete's once `destroy_instance` sent it. Followed with
    /// zoneOperations.get, never waited on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operation: String,
    /// The requestId of the bulkInsert this attempt was sent in (empty: sent alone, or not yet):
    /// set with [`Vm::insert_sent`] before the bulk goes, so a bulk sent again after a crash is
    /// the same request with the same members; `operation` is the bulk's once it is known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub batch: String,
    /// Its instance, once Compute has made it (set once per incarnation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<Placed>,
    /// The bot's first_seen_ts (set once).
    #[serde(default)]
    pub connected: Option<DateTime<Utc>>,
    /// Made standard while its Spot Config failed over (its attributes are the Config's made
    /// standard: it counts as current, and is replaced on its lifetime like any other).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failover: bool,
    /// Its rank among its Config's machine types (0: `attributes.machine_type`, then each of
    /// `fallback_machine_types` in order; its attributes carry the rank's machine type), when
    /// its Config had fallbacks as it was made (`None`: none; a refusal for want of capacity
    /// then backs off the whole zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Made as its Config's canary while the Config's breaker was open.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub canary: bool,
    /// When this incarnation registered with an identity proof (once per incarnation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered: Option<DateTime<Utc>>,
    /// Scheduled for removal (its Config shrank or went away).
    #[serde(default)]
    pub drained: bool,
    /// When TerminateBot was last sent.
    #[serde(default)]
    pub terminate_sent: Option<DateTime<Utc>>,
    /// Delete attempt; a new attempt (new requestId) follows a delete operation that failed.
    #[serde(default)]
    pub destroy_attempt: u32,
    /// When `destroy_instance` first sent the delete of this incarnation's instance (a stopping
    /// or vanished instance is then expected, not a fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroying: Option<DateTime<Utc>>,
    /// Why this incarnation is unhealthy (its bot is dead, its instance stopped or gone, its bot
    /// never connected); set once when found, cleared if the bot comes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
    /// Set while it is kept warm (suspended or stopped beyond its Config's target) or wakes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked: Option<super::parked::Parked>,
    /// Parks and wakes of this incarnation so far: each request's id names its turn, so no two
    /// are the same request.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub power_turns: u32,
    /// When it was last woken from the warm pool: its bot, silent on purpose while parked, is
    /// coming back, so a death Swarming recorded before this is no fault (see
    /// [`Vm::coming_back`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woken: Option<DateTime<Utc>>,
    /// What its instance is billed as, since when and at what rate (see `model::spend`): none
    /// until it is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meter: Option<crate::model::ledger::Metered>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The zone and rank of a place [`Vm::place`] wrote (rank 0 when it names none).
pub fn split_place(place: &str) -> (&str, u32) {
    match place.rsplit_once('#') {
        Some((zone, rank)) => (zone, rank.parse().unwrap_or(0)),
        None => (place, 0),
    }
}

/// The instance a VM's incarnation runs on, as Compute reported it when it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Placed {
    /// selfLink: the guard a late task compares before touching the instance.
    pub url: String,
    /// Creation time: the lifetime counts from here.
    pub created: DateTime<Utc>,
    /// Compute Engine's numeric instance id (what its identity token names; empty in records
    /// written before it was kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_id: String,
    /// Internal address.
    #[serde(default)]
    pub internal_ip: String,
    /// External address.
    #[serde(default)]
    pub external_ip: String,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Placed {
    /// A machine at `url`, recorded at `at`, of which nothing else is known (no instance id, no
    /// address): a static pool's, or a provider's that makes no Compute instance.
    pub fn known_by_url(url: String, at: DateTime<Utc>) -> Placed {
        Placed {
            unknown: Default::default(),
            url,
            created: at,
            instance_id: String::new(),
            internal_ip: String::new(),
            external_ip: String::new(),
        }
    }
}

/// What is wrong with a VM's incarnation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Swarming says the bot is dead.
    BotDead,
    /// The instance is stopped, preempted, suspended or gone.
    InstanceDown,
    /// No bot connected before the timeout.
    NeverConnected,
}

/// A fault found on a VM's incarnation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Fault {
    /// Which.
    pub kind: FaultKind,
    /// What was seen (`instance TERMINATED`, `bot dead since …`).
    pub detail: String,
    /// When it was found.
    pub at: DateTime<Utc>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Vm {
    /// True when its bot, dead with `last_seen`, went silent while the VM was parked and the VM
    /// has since been woken: the bot is coming back (the same bot after a resume, a new
    /// connection after a start), as a booting VM's is; not a dead bot to replace or let go
    /// first. At `now` (time and `bot_grace`), within the timeout or the grace from the wake,
    /// whichever is longer (after it, a dead bot is one).
    pub fn coming_back(
        &self,
        last_seen: Option<DateTime<Utc>>,
        now: Option<(DateTime<Utc>, chrono::TimeDelta)>,
    ) -> bool {
        self.woken.is_some_and(|w| {
            let within = crate::config::Secs(self.timeout).chrono();
            last_seen.is_none_or(|t| t <= w) && now.is_none_or(|(n, grace)| n < w + within.max(grace))
        })
    }

    /// When this incarnation is due for replacement.
    pub fn deadline(&self) -> Option<DateTime<Utc>> {
        // A zero lifetime (static machines may have one): no deadline.
        self.instance
            .as_ref()
            .filter(|_| self.lifetime > 0)
            .map(|i| i.created + crate::config::Secs(self.lifetime).chrono())
    }

    /// True once its incarnation is past its [`Vm::deadline`] at `now` (due for replacement).
    pub fn past_deadline(&self, now: DateTime<Utc>) -> bool {
        self.deadline().is_some_and(|d| d < now)
    }

    /// Its instance's selfLink, if it has one.
    pub fn url(&self) -> Option<&str> {
        self.instance.as_ref().map(|i| i.url.as_str())
    }

    /// Reads a stored VM ([`super::format::decode`]: a newer build's record is left to it).
    /// Records written before `instance` existed kept its fields flat (`url`, `created`,
    /// `internal_ip`, `external_ip`); they are read into `instance`.
    pub fn decode(raw: &str) -> Result<Vm, super::Undecoded> {
        let mut vm: Vm = super::format::decode(raw)?;
        if vm.instance.is_none() && vm.unknown.get("url").is_some() {
            let mut take = |name: &str| vm.unknown.remove(name).unwrap_or_default();
            let (url, created, internal_ip, external_ip) =
                (take("url"), take("created"), take("internal_ip"), take("external_ip"));
            let text = |v: serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            let created = serde_json::from_value::<Option<DateTime<Utc>>>(created)
                .map_err(|e| super::Undecoded::Corrupt(format!("created: {e}")))?;
            if let (false, Some(created)) = (url.as_str().unwrap_or_default().is_empty(), created) {
                vm.instance = Some(Placed {
                    url: text(url),
                    created,
                    instance_id: String::new(),
                    internal_ip: text(internal_ip),
                    external_ip: text(external_ip),
                    unknown: Default::default(),
                });
            }
        }
        Ok(vm)
    }

    /// Project of its instance.
    pub fn project(&self) -> &str {
        &self.attributes.project
    }

    /// Zone of its instance.
    pub fn zone(&self) -> &str {
        &self.attributes.zone
    }

    /// Where the stores sum its counts per place: its zone, and `#<rank>` after it on a fallback
    /// rank (1 or more); read back with [`split_place`].
    pub fn place(&self) -> String {
        match self.rank {
            Some(r @ 1..) => format!("{}#{r}", self.zone()),
            _ => self.zone().to_owned(),
        }
    }

    /// True while its bot is connected and nothing is wrong with it.
    pub fn healthy_connected(&self) -> bool {
        self.connected.is_some() && self.instance.is_some() && self.fault.is_none() && self.parked.is_none()
    }

    /// True while it serves and stays: healthy and connected, and not being drained.
    pub fn serving(&self) -> bool {
        self.healthy_connected() && !self.drained
    }

    /// What it is billed as now (`model::spend`): nothing until its instance is made, nor for a
    /// machine this service does not make (no machine type: a static pool's); suspended or
    /// stopped once Compute said so; running otherwise.
    pub fn billed(&self) -> Option<crate::model::ledger::Billed> {
        use super::parked::Park;
        use crate::model::ledger::Billed;
        if self.instance.is_none() || self.attributes.machine_type.is_empty() {
            return None;
        }
        Some(match &self.parked {
            Some(p) if p.done && p.waking.is_none() => match p.how {
                Park::Suspend => Billed::Suspended,
                Park::Stop => Billed::Stopped,
            },
            _ => Billed::Running,
        })
    }

    /// What it adds to its Config's counts: bit `i` set adds one to count `i` of [`Sums`] (the
    /// one rule; the stores keep the per-Config sums in step with every VM write and delete).
    pub fn counted(&self) -> u8 {
        let fault = self.fault.as_ref().map(|f| f.kind);
        let created = self.instance.is_some();
        [
            true,
            created,
            created && fault != Some(FaultKind::InstanceDown) && self.parked.is_none(),
            self.healthy_connected(),
            self.drained,
            fault == Some(FaultKind::BotDead),
            matches!(fault, Some(FaultKind::InstanceDown | FaultKind::NeverConnected)),
            created && self.parked.is_some(),
        ]
        .iter()
        .enumerate()
        .fold(0, |bits, (i, on)| bits | (u8::from(*on) << i))
    }

    /// True when it is being retired on purpose (drained, past its deadline unless its Config is
    /// `paused`, its bot asked to terminate, or its instance being deleted), so a stopping
    /// instance is expected rather than a fault.
    pub fn retiring(&self, now: DateTime<Utc>, paused: bool) -> bool {
        self.drained
            || self.terminate_sent.is_some()
            || self.destroying.is_some()
            || (!paused && self.past_deadline(now))
    }
}
