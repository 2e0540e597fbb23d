//! Config: one pool of VMs, as operators write it (YAML or JSON), with its validation, durations
//! and the amount schedule (LUCI `config.proto` fields, luci-gce.md §2.1–2.2 and §7.4).

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Datelike, Duration as ChronoDuration, NaiveTime, TimeZone, Utc, Weekday};
use serde::{Deserialize, Deserializer, Serialize};

/// A validation error: the field and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {rule}")]
pub struct ConfigError {
    /// Path of the field, e.g. `linux.attributes.disk[0].type`.
    pub field: String,
    /// The rule.
    pub rule: String,
}

fn err(field: impl Into<String>, rule: impl Into<String>) -> ConfigError {
    ConfigError { field: field.into(), rule: rule.into() }
}

/// A duration written `90s`, `15m`, `1h`, `30d`, `2mo` (30 days) or as whole seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(into = "u64")]
pub struct Secs(pub u64);

impl From<Secs> for u64 {
    fn from(s: Secs) -> u64 {
        s.0
    }
}

impl Secs {
    /// Parses `<n>(s|m|h|d|mo)`; overflow clamps to the largest value.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (n, unit) = s.split_at(split);
        let n: u64 =
            n.parse().map_err(|_| format!("{s:?} is not a duration like 90s, 15m, 1h, 30d or 2mo"))?;
        let mult = match unit {
            "s" | "" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "mo" => 30 * 86_400,
            _ => return Err(format!("{s:?}: unit must be s, m, h, d or mo")),
        };
        Ok(Secs(n.saturating_mul(mult)))
    }

    /// As a chrono duration.
    pub fn chrono(self) -> ChronoDuration {
        ChronoDuration::seconds(self.0.min(i64::MAX as u64 / 1000) as i64)
    }
}

impl<'de> Deserialize<'de> for Secs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Secs(n)),
            Raw::S(s) => Secs::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0)
    }
}

/// Day of the week, as in the proto (`MONDAY` … `SUNDAY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
pub enum Day {
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl Day {
    fn weekday(self) -> Weekday {
        match self {
            Day::Monday => Weekday::Mon,
            Day::Tuesday => Weekday::Tue,
            Day::Wednesday => Weekday::Wed,
            Day::Thursday => Weekday::Thu,
            Day::Friday => Weekday::Fri,
            Day::Saturday => Weekday::Sat,
            Day::Sunday => Weekday::Sun,
        }
    }
}

/// When a weekly schedule starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeOfDay {
    /// Day of the week.
    pub day: Day,
    /// `H:MM`, 24-hour.
    pub time: String,
    /// IANA time zone; empty means UTC.
    #[serde(default)]
    pub location: String,
}

/// A weekly window with its own bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Start of the window.
    pub start: TimeOfDay,
    /// Length of the window (non-zero, at most a week).
    pub length: Secs,
    /// Lower bound while the window is open.
    #[serde(default)]
    pub min: u32,
    /// Upper bound while the window is open.
    #[serde(default)]
    pub max: u32,
}

/// How many VMs: bounds and weekly windows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Amount {
    /// Lower bound (and the amount of a new pool).
    #[serde(default)]
    pub min: u32,
    /// Upper bound.
    #[serde(default)]
    pub max: u32,
    /// Weekly windows with other bounds; they must not overlap.
    #[serde(default)]
    pub change: Vec<Schedule>,
}

/// A disk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
}

/// A metadata item: exactly one of `from_text: "key:value"` or `from_file: "key:path"` (the path
/// relative to the config file, read at import).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// `key:value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_text: Option<String>,
    /// `key:path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_file: Option<String>,
}

impl Metadata {
    /// A `from_text` item.
    pub fn text(s: impl Into<String>) -> Self {
        Self { from_text: Some(s.into()), from_file: None }
    }

    /// `key` and `value` of a `from_text` item.
    pub fn pair(&self) -> Option<(&str, &str)> {
        self.from_text.as_deref().map(|s| s.split_once(':').unwrap_or((s, "")))
    }
}

/// An access config of a network interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessConfig {
    /// `ONE_TO_ONE_NAT`.
    #[serde(default, rename = "type")]
    pub kind: String,
}

/// A network interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
}

/// A service account.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceAccount {
    /// Email (or `default`).
    pub email: String,
    /// OAuth scopes.
    #[serde(default)]
    pub scope: Vec<String>,
}

/// A node affinity of sole-tenant scheduling.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeAffinity {
    /// Label key.
    pub key: String,
    /// `IN` or `NOT_IN`.
    pub operator: String,
    /// Values.
    #[serde(default)]
    pub values: Vec<String>,
}

/// Scheduling options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scheduling {
    /// Sole-tenant node affinities.
    #[serde(default)]
    pub node_affinity: Vec<NodeAffinity>,
}

/// The instance template (LUCI `config.VM`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
}

/// One pool of VMs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Pool name and the start of every VM id and hostname.
    #[serde(default)]
    pub prefix: String,
    /// How many VMs.
    #[serde(default)]
    pub amount: Amount,
    /// Instance template.
    #[serde(default)]
    pub attributes: Attributes,
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
}

/// Largest Config file read (bytes).
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Deepest `[`/`{` nesting a Config file may have (a Config needs about 5).
pub const MAX_NESTING: usize = 32;
/// Most metadata items of a Config.
pub const MAX_METADATA_ITEMS: usize = 10_000;
/// Largest total size of the metadata keys and values, as Compute Engine allows (512 KiB).
pub const MAX_METADATA_BYTES: usize = 512 * 1024;
/// Largest metadata value, as Compute Engine allows (256 KiB).
pub const MAX_METADATA_VALUE: usize = 256 * 1024;

/// Checks the depth of `[`/`{` nesting outside quoted strings, before a parser sees the text
/// (parsing deep nesting costs more than linear time).
pub fn check_nesting(text: &str, origin: &str) -> Result<(), ConfigError> {
    let (mut depth, mut quote, mut escaped, mut comment) = (0usize, None::<char>, false, false);
    let mut prev = '\n';
    for c in text.chars() {
        if comment {
            comment = c != '\n';
        } else if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
        } else {
            // A quote opens a string only where a value starts (`it's` is no string); `#` after
            // a space starts a comment.
            let at_start = prev.is_whitespace() || matches!(prev, ':' | '[' | '{' | ',' | '-');
            match c {
                '"' | '\'' if at_start => quote = Some(c),
                '#' if prev.is_whitespace() => comment = true,
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(err(origin, format!("nests [ and {{ deeper than {MAX_NESTING} levels")));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        prev = c;
    }
    Ok(())
}

/// Labels this service sets on every instance (and reads back to adopt or audit).
pub mod labels {
    /// The deployment (namespace) that manages the instance.
    pub const DEPLOYMENT: &str = "gce-backend";
    /// The Config prefix.
    pub const CONFIG: &str = "gce-backend-config";
    /// The VM id.
    pub const VM: &str = "gce-backend-vm";
}

/// Digits of the largest index a pool can have.
fn index_digits(max: u32) -> usize {
    max.saturating_sub(1).to_string().len()
}

/// A valid Compute Engine resource name: `[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn valid_gce_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

fn valid_label(s: &str, key: bool) -> bool {
    s.len() <= 63
        && (!key || s.as_bytes().first().is_some_and(u8::is_ascii_lowercase))
        && s.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
}

impl Schedule {
    fn start_time(&self) -> Result<NaiveTime, String> {
        let (h, m) = self.start.time.split_once(':').ok_or("time must be H:MM")?;
        let (h, m): (u32, u32) = (h.parse().map_err(|_| "bad hour")?, m.parse().map_err(|_| "bad minute")?);
        if self.start.time.split_once(':').is_some_and(|(_, m)| m.len() != 2) {
            return Err("time must be H:MM".into());
        }
        NaiveTime::from_hms_opt(h, m, 0).ok_or_else(|| "hour must be 0-23 and minute 0-59".into())
    }

    fn tz(&self) -> Result<chrono_tz::Tz, String> {
        if self.start.location.is_empty() {
            return Ok(chrono_tz::UTC);
        }
        self.start.location.parse().map_err(|_| format!("unknown IANA time zone {:?}", self.start.location))
    }

    /// The latest start at or before `now`.
    fn most_recent_start(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let (tz, t) = (self.tz().ok()?, self.start_time().ok()?);
        let local = now.with_timezone(&tz).date_naive();
        (0..=7).find_map(|back| {
            let d = local - ChronoDuration::days(back);
            if d.weekday() != self.start.day.weekday() {
                return None;
            }
            let start = tz.from_local_datetime(&d.and_time(t)).earliest()?.with_timezone(&Utc);
            (start <= now).then_some(start)
        })
    }

    /// Start as minutes into a UTC reference week (Monday 00:00), for the overlap check.
    fn week_minute(&self) -> Result<i64, String> {
        let (tz, t) = (self.tz()?, self.start_time()?);
        // A Monday in January: offsets of that week stand for the whole year.
        let monday = chrono::NaiveDate::from_ymd_opt(2024, 1, 1).expect("valid date");
        let day = monday + ChronoDuration::days(self.start.day.weekday().num_days_from_monday() as i64);
        let start = tz.from_local_datetime(&day.and_time(t)).earliest().ok_or("time does not exist")?;
        let utc_monday = Utc.from_utc_datetime(&monday.and_hms_opt(0, 0, 0).expect("valid"));
        Ok((start.with_timezone(&Utc) - utc_monday).num_minutes().rem_euclid(7 * 24 * 60))
    }
}

impl Amount {
    /// The amount for `proposed` at `now`: clamped to the open window's bounds, or to
    /// `[min, max]` outside every window.
    pub fn at(&self, proposed: u32, now: DateTime<Utc>) -> u32 {
        for s in &self.change {
            if let Some(start) = s.most_recent_start(now)
                && now < start + s.length.chrono()
            {
                return proposed.clamp(s.min, s.max.max(s.min));
            }
        }
        proposed.clamp(self.min, self.max.max(self.min))
    }

    /// The largest amount any window allows.
    pub fn ceiling(&self) -> u32 {
        self.change.iter().map(|s| s.max).chain([self.max]).max().unwrap_or(0)
    }
}

impl Config {
    /// Parses a YAML (or JSON, a subset of YAML) document; unknown fields are errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let c: Config = serde_yaml::from_str(text).map_err(|e| err(origin, format!("cannot parse: {e}")))?;
        if c == Config::default() {
            return Err(err(origin, "is empty (no field is set): a Config file needs at least a prefix"));
        }
        Ok(c)
    }

    /// Checks the service's limits (settings `[limits]`).
    pub fn check_limits(&self, limits: &crate::ctx::Limits) -> Result<(), ConfigError> {
        let ceiling = self.amount.ceiling().max(self.amount.min);
        if ceiling > limits.max_amount {
            return Err(err(
                format!("{}.amount", self.prefix),
                format!(
                    "asks for up to {ceiling} VMs, above the service's max_amount {} (settings [limits])",
                    limits.max_amount
                ),
            ));
        }
        Ok(())
    }

    /// Checks every rule of one Config; errors name the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let p = if self.prefix.is_empty() { "<unnamed>" } else { &self.prefix };
        let f = |field: &str| format!("{p}.{field}");
        if self.prefix.is_empty() {
            return Err(err("prefix", "is required"));
        }
        if !valid_gce_name(&self.prefix) {
            return Err(err(f("prefix"), "must match [a-z]([-a-z0-9]*[a-z0-9])?"));
        }
        let a = &self.amount;
        if a.min > a.max {
            return Err(err(f("amount"), format!("min {} is above max {}", a.min, a.max)));
        }
        let mut windows = Vec::new();
        for (i, s) in a.change.iter().enumerate() {
            let field = f(&format!("amount.change[{i}]"));
            s.start_time().map_err(|e| err(format!("{field}.start.time"), e))?;
            s.tz().map_err(|e| err(format!("{field}.start.location"), e))?;
            if s.length.0 == 0 || s.length.0 > 7 * 86_400 {
                return Err(err(format!("{field}.length"), "must be non-zero and at most 7d"));
            }
            if s.min > s.max {
                return Err(err(field, format!("min {} is above max {}", s.min, s.max)));
            }
            let start = s.week_minute().map_err(|e| err(format!("{field}.start"), e))?;
            windows.push((i, start, start + (s.length.0 / 60) as i64));
        }
        let week = 7 * 24 * 60;
        for (n, &(i, s1, e1)) in windows.iter().enumerate() {
            for &(j, s2, e2) in &windows[n + 1..] {
                // Half-open intervals on a circle: compare with the other shifted by a week.
                let overlaps = |(s1, e1): (i64, i64), (s2, e2): (i64, i64)| s1 < e2 && s2 < e1;
                if [-week, 0, week].iter().any(|&k| overlaps((s1, e1), (s2 + k, e2 + k))) {
                    return Err(err(
                        f(&format!("amount.change[{j}]")),
                        format!("overlaps amount.change[{i}]"),
                    ));
                }
            }
        }
        // Every hostname <prefix>-<index>-<4 chars> must be a valid instance name.
        let longest = self.prefix.len() + 1 + index_digits(a.ceiling().max(1)) + 5;
        if longest > 63 {
            return Err(err(
                f("prefix"),
                format!(
                    "hostnames <prefix>-<index>-xxxx would be {longest} characters; instance names have at most 63"
                ),
            ));
        }
        self.validate_attributes(&f)?;
        if self.lifetime.0 == 0 {
            return Err(err(f("lifetime"), "is required and must be non-zero"));
        }
        if self.swarming.is_empty() {
            return Err(err(f("swarming"), "is required"));
        }
        if !(self.swarming.starts_with("https://") || self.swarming.starts_with("http://")) {
            return Err(err(f("swarming"), "must be an https:// URL"));
        }
        Ok(())
    }

    fn validate_attributes(&self, f: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
        let v = &self.attributes;
        if v.disk.is_empty() {
            return Err(err(f("attributes.disk"), "at least one disk is required"));
        }
        for (i, d) in v.disk.iter().enumerate() {
            let field = f(&format!("attributes.disk[{i}]"));
            let kind = d.kind.rsplit('/').next().unwrap_or_default();
            if !d.kind.is_empty() {
                let parts: Vec<&str> = d.kind.split('/').collect();
                if parts.len() != 4 || parts[0] != "zones" || parts[2] != "diskTypes" || parts[3].is_empty() {
                    return Err(err(
                        format!("{field}.type"),
                        "must be empty or zones/<zone>/diskTypes/<type>",
                    ));
                }
            }
            if matches!(kind, "pd-standard" | "pd-ssd") {
                if !d.interface.is_empty() && d.interface != "SCSI" {
                    return Err(err(format!("{field}.interface"), format!("{kind} requires SCSI")));
                }
                let image_ok = d.image.starts_with("global/images/")
                    || (d.image.starts_with("projects/") && d.image.contains("/global/images/"));
                if !image_ok {
                    return Err(err(
                        format!("{field}.image"),
                        "must be global/images/X or projects/P/global/images/X",
                    ));
                }
            }
            if kind == "local-ssd" && !d.image.is_empty() {
                return Err(err(format!("{field}.image"), "a local-ssd disk may not have an image"));
            }
            if (d.provisioned_iops.is_some() || d.provisioned_throughput.is_some())
                && !kind.starts_with("hyperdisk")
            {
                return Err(err(field, "provisioned_iops/throughput are for hyperdisk types only"));
            }
            if !d.interface.is_empty() && d.interface != "SCSI" && d.interface != "NVME" {
                return Err(err(format!("{field}.interface"), "must be SCSI or NVME"));
            }
        }
        if v.machine_type.is_empty() {
            return Err(err(f("attributes.machine_type"), "is required"));
        }
        if v.metadata.len() > MAX_METADATA_ITEMS {
            return Err(err(
                f("attributes.metadata"),
                format!("{} items; at most {MAX_METADATA_ITEMS}", v.metadata.len()),
            ));
        }
        let bytes: usize = v
            .metadata
            .iter()
            .map(|m| m.from_text.as_ref().or(m.from_file.as_ref()).map_or(0, String::len))
            .sum();
        if bytes > MAX_METADATA_BYTES {
            return Err(err(
                f("attributes.metadata"),
                format!("{bytes} bytes in all; Compute Engine allows {MAX_METADATA_BYTES}"),
            ));
        }
        for (i, m) in v.metadata.iter().enumerate() {
            let field = f(&format!("attributes.metadata[{i}]"));
            if m.pair().is_some_and(|(_, value)| value.len() > MAX_METADATA_VALUE) {
                return Err(err(field, format!("value above {MAX_METADATA_VALUE} bytes")));
            }
            match (&m.from_text, &m.from_file) {
                (Some(s), None) | (None, Some(s)) if s.contains(':') => {}
                (Some(_), None) | (None, Some(_)) => {
                    return Err(err(field, "must be key:value (from_file: key:path)"));
                }
                _ => return Err(err(field, "exactly one of from_text or from_file")),
            }
        }
        if v.network_interface.is_empty() {
            return Err(err(f("attributes.network_interface"), "at least one network interface is required"));
        }
        if v.project.is_empty() {
            return Err(err(f("attributes.project"), "is required"));
        }
        if v.zone.is_empty() {
            return Err(err(f("attributes.zone"), "is required"));
        }
        if !valid_gce_name(&v.zone) {
            return Err(err(
                f("attributes.zone"),
                format!("{:?} is not a zone name like us-central1-b", v.zone),
            ));
        }
        for (k, val) in &v.label {
            if !valid_label(k, true) || !valid_label(val, false) || k.starts_with("gce-backend") {
                return Err(err(
                    f(&format!("attributes.label.{k}")),
                    "keys and values are [a-z0-9_-] (keys start with a letter), at most 63; gce-backend* keys are reserved",
                ));
            }
        }
        if let Some(s) = &v.scheduling {
            for (i, a) in s.node_affinity.iter().enumerate() {
                if a.operator != "IN" && a.operator != "NOT_IN" {
                    return Err(err(
                        f(&format!("attributes.scheduling.node_affinity[{i}].operator")),
                        "must be IN or NOT_IN",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Validates a set of Configs together: each one, and no prefix a prefix of another.
pub fn validate_all(configs: &[Config]) -> Result<(), ConfigError> {
    for c in configs {
        c.validate()?;
    }
    check_prefixes(configs)
}

/// The rule across Configs: no prefix is a prefix of another (nor equal to it).
pub fn check_prefixes(configs: &[Config]) -> Result<(), ConfigError> {
    let mut prefixes: Vec<&str> = configs.iter().map(|c| c.prefix.as_str()).collect();
    prefixes.sort();
    for w in prefixes.windows(2) {
        if w[1].starts_with(w[0]) {
            return Err(err(format!("{}.prefix", w[1]), format!("{:?} is a prefix of it (or equal)", w[0])));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const YAML: &str = r#"
prefix: linux
amount: {min: 2, max: 5, change: [{start: {day: MONDAY, time: "9:00", location: America/Los_Angeles}, length: 10h, min: 4, max: 5}]}
attributes:
  project: proj
  zone: us-central1-b
  machine_type: "zones/{{.Zone}}/machineTypes/e2-small"
  disk: [{image: projects/debian-cloud/global/images/debian-12, size: 10, type: "zones/{{.Zone}}/diskTypes/pd-ssd"}]
  metadata: [{from_text: "startup-script:echo hi"}]
  network_interface: [{network: global/networks/default, access_config: [{type: ONE_TO_ONE_NAT}]}]
  label: {team: infra}
lifetime: 1d
timeout: 10m
swarming: https://swarm.example.com
"#;

    fn cfg() -> Config {
        Config::parse(YAML, "linux.yaml").unwrap()
    }

    #[test]
    fn durations_parse_with_units_and_clamp() {
        assert_eq!(Secs::parse("90s").unwrap().0, 90);
        assert_eq!(Secs::parse("15m").unwrap().0, 900);
        assert_eq!(Secs::parse("2mo").unwrap().0, 60 * 86_400);
        assert_eq!(Secs::parse("99999999999999999d").unwrap().0, u64::MAX);
        assert!(Secs::parse("1w").is_err() && Secs::parse("h").is_err());
        assert_eq!(cfg().lifetime.0, 86_400);
    }

    #[test]
    fn a_good_config_validates_in_yaml_and_json() {
        cfg().validate().unwrap();
        let json = serde_json::to_string(&cfg()).unwrap();
        Config::parse(&json, "linux.json").unwrap().validate().unwrap();
    }

    #[test]
    fn each_rule_names_its_field() {
        type Breaker = fn(&mut Config);
        let cases: Vec<(Breaker, &str)> = vec![
            (|c| c.prefix.clear(), "prefix"),
            (|c| c.prefix = "Bad_Prefix".into(), "Bad_Prefix.prefix"),
            (|c| c.prefix = "x".repeat(60), ".prefix"),
            (|c| c.amount.min = 9, "linux.amount"),
            (|c| c.amount.change[0].start.time = "25:00".into(), "amount.change[0].start.time"),
            (|c| c.amount.change[0].start.location = "Mars/Base".into(), "amount.change[0].start.location"),
            (|c| c.amount.change[0].length = Secs(0), "amount.change[0].length"),
            (|c| c.attributes.disk.clear(), "attributes.disk"),
            (|c| c.attributes.disk[0].kind = "pd-ssd".into(), "attributes.disk[0].type"),
            (|c| c.attributes.disk[0].image = "debian".into(), "attributes.disk[0].image"),
            (|c| c.attributes.disk[0].provisioned_iops = Some(5), "attributes.disk[0]"),
            (|c| c.attributes.machine_type.clear(), "attributes.machine_type"),
            (|c| c.attributes.metadata = vec![Metadata::text("novalue")], "attributes.metadata[0]"),
            (|c| c.attributes.metadata = vec![Metadata::default()], "attributes.metadata[0]"),
            (|c| c.attributes.network_interface.clear(), "attributes.network_interface"),
            (|c| c.attributes.project.clear(), "attributes.project"),
            (|c| c.attributes.zone.clear(), "attributes.zone"),
            (
                |c| c.attributes.label.insert("gce-backend".into(), "x".into()).map(drop).unwrap_or(()),
                "attributes.label",
            ),
            (|c| c.lifetime = Secs(0), "linux.lifetime"),
            (|c| c.swarming = "swarm.example.com".into(), "linux.swarming"),
        ];
        for (break_it, field) in cases {
            let mut c = cfg();
            break_it(&mut c);
            let e = c.validate().expect_err(field);
            assert!(e.field.contains(field) || e.field.ends_with(field), "{field}: got {e}");
        }
        let e = Config::parse("prefix: x\nbogus: 1\n", "x.yaml").unwrap_err();
        assert!(e.rule.contains("bogus"), "{e}");
        let mut c = cfg();
        c.attributes.zone = "Not_A_Zone".into();
        assert_eq!(c.validate().unwrap_err().field, "linux.attributes.zone");
    }

    #[test]
    fn empty_files_are_errors_of_the_file() {
        for text in ["", "# only a comment\n", "---\n", "{}", "---\n# x\n"] {
            let e = Config::parse(text, "pools/linux.yaml").unwrap_err();
            assert_eq!(e.field, "pools/linux.yaml", "{text:?}");
            assert!(e.rule.contains("empty") || e.rule.contains("cannot parse"), "{text:?}: {e}");
        }
    }

    #[test]
    fn nesting_is_counted_outside_strings_and_comments() {
        check_nesting(&format!("a: \"{}\"", "[".repeat(100)), "f").unwrap();
        check_nesting(&format!("a: '{}'", "{".repeat(100)), "f").unwrap();
        check_nesting(&format!("# {}\nb: 1", "[".repeat(100)), "f").unwrap();
        let sneaky = format!("# don't\nb: {}", "[".repeat(100));
        assert!(check_nesting(&sneaky, "f").unwrap_err().rule.contains("deeper than 32"));
        assert!(check_nesting(&"[".repeat(33), "f").is_err());
        check_nesting(&"[".repeat(32), "f").unwrap();
    }

    #[test]
    fn amounts_above_the_limit_are_refused() {
        let limits = crate::ctx::Limits { max_amount: 100, ..crate::ctx::Limits::default() };
        let mut c = cfg();
        c.check_limits(&limits).unwrap();
        c.amount.max = 10_000_000;
        let e = c.check_limits(&limits).unwrap_err();
        assert_eq!(e.field, "linux.amount");
        assert!(e.rule.contains("10000000") && e.rule.contains("max_amount 100"), "{e}");
        let mut c = cfg();
        c.amount.change[0].max = 101;
        assert!(c.check_limits(&limits).is_err(), "a window's max counts too");
    }

    #[test]
    fn prefixes_may_not_be_prefixes_of_each_other() {
        let a = cfg();
        let mut b = cfg();
        b.prefix = "linux-big".into();
        let e = validate_all(&[a.clone(), b]).unwrap_err();
        assert_eq!(e.field, "linux-big.prefix");
        let mut c = cfg();
        c.prefix = "mac".into();
        validate_all(&[a, c]).unwrap();
    }

    #[test]
    fn overlapping_schedules_are_refused_even_across_the_week_wrap() {
        let mut c = cfg();
        let mut late = c.amount.change[0].clone();
        late.start =
            TimeOfDay { day: Day::Monday, time: "18:00".into(), location: "America/Los_Angeles".into() };
        c.amount.change.push(late);
        assert!(c.validate().unwrap_err().rule.contains("overlaps"));
        let mut c = cfg();
        c.amount.change[0].start.day = Day::Sunday;
        c.amount.change[0].length = Secs(2 * 86_400);
        let mut monday = c.amount.change[0].clone();
        monday.start = TimeOfDay { day: Day::Monday, time: "12:00".into(), location: String::new() };
        monday.length = Secs(3600);
        c.amount.change.push(monday);
        assert!(c.validate().unwrap_err().rule.contains("overlaps"), "Sunday + 2d reaches Monday noon");
    }

    #[test]
    fn amount_follows_the_open_window() {
        let c = cfg();
        // Monday 2026-11-23 10:00 in Los Angeles is 18:00 UTC: inside the 9:00 + 10h window.
        let inside = Utc.with_ymd_and_hms(2026, 11, 23, 18, 0, 0).unwrap();
        let outside = Utc.with_ymd_and_hms(2026, 11, 24, 18, 0, 0).unwrap();
        assert_eq!(c.amount.at(0, inside), 4);
        assert_eq!(c.amount.at(0, outside), 2);
        assert_eq!(c.amount.at(3, outside), 3, "the current amount is kept within bounds");
        assert_eq!(c.amount.at(9, outside), 5);
    }
}
