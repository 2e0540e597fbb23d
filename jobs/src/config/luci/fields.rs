//! The fields of one `vms { … }` block read as a Config (LUCI `config.proto`'s field map): every
//! field that cannot be read is a mistake with its line and path, and the reading goes on, so one
//! pass finds them all. What could not be read is left at its default (a list keeps its item, so
//! the paths of the others stay as written); the caller leaves out the rules about it.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use super::super::attributes::*;
use super::super::spec::Config;
use super::super::textproto::{Field, Value};
use super::super::units::{Amount, Day, Schedule, Secs, TimeOfDay};

/// A field that cannot be read: its line, its path (`attributes.disk[0].size`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Bad {
    /// The line of the field.
    pub line: u32,
    /// Its path, as validation names fields (without the prefix).
    pub path: String,
    /// What is wrong.
    pub rule: String,
}

type R<T> = Result<T, Bad>;

/// What reading one block found besides its Config.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    /// Field paths and their lines.
    pub lines: Vec<(String, u32)>,
    /// The fields that could not be read.
    pub bad: Vec<Bad>,
    /// Paths left at a stand-in value besides those of `bad` (a schedule's start with no day).
    pub unread: Vec<String>,
    /// Durations as written (`duration: "1d"`), by path (`lifetime`, `amount.change[0].length`).
    pub durations: Vec<(String, String)>,
}

/// Reads the fields of one `vms` block: the Config, as much of it as could be read, and what
/// reading it found.
pub(super) fn block(body: &[Field], line: u32) -> (Config, Gathered) {
    let cx = Cx::default();
    let c = cx.config(body, line);
    (c, cx.0.into_inner())
}

/// Repeated fields of LUCI's schema (paths index them, as validation does).
const REPEATED: &[&str] = &[
    "change",
    "disk",
    "metadata",
    "network_interface",
    "access_config",
    "service_account",
    "node_affinity",
    "owner",
    "tag",
    "scope",
    "values",
    "label",
];

fn bad(g: &Field, path: &str, rule: impl Into<String>) -> Bad {
    Bad { line: g.line, path: path.into(), rule: rule.into() }
}

fn string(g: &Field, path: &str) -> R<String> {
    match &g.value {
        Value::Str(s) => Ok(s.clone()),
        _ => Err(bad(g, path, "must be a quoted string")),
    }
}

/// An enum value: a name (a quoted one is taken too).
fn name(g: &Field, path: &str) -> R<String> {
    match &g.value {
        Value::Ident(s) | Value::Str(s) => Ok(s.clone()),
        _ => Err(bad(g, path, "must be a name like SCSI")),
    }
}

fn uint(g: &Field, path: &str) -> R<u64> {
    match &g.value {
        Value::Num(n) if n.starts_with('-') => Err(bad(g, path, "must not be negative")),
        Value::Num(n) => {
            n.trim_start_matches('+').parse().map_err(|_| bad(g, path, "must be a whole number"))
        }
        _ => Err(bad(g, path, "must be a number")),
    }
}

fn u32v(g: &Field, path: &str) -> R<u32> {
    u32::try_from(uint(g, path)?).map_err(|_| bad(g, path, format!("at most {}", u32::MAX)))
}

fn boolean(g: &Field, path: &str) -> R<bool> {
    match &g.value {
        Value::Ident(s) if matches!(s.as_str(), "true" | "True" | "t") => Ok(true),
        Value::Ident(s) if matches!(s.as_str(), "false" | "False" | "f") => Ok(false),
        Value::Num(n) if n == "1" || n == "0" => Ok(n == "1"),
        _ => Err(bad(g, path, "must be true or false")),
    }
}

fn msg<'a>(g: &'a Field, path: &str) -> R<&'a [Field]> {
    match &g.value {
        Value::Msg(m) => Ok(m),
        _ => Err(bad(g, path, "must be a message: { … }")),
    }
}

fn unknown(g: &Field, path: &str) -> Bad {
    bad(g, path, "is not a field of LUCI's config.proto here")
}

fn refuse(g: &Field, path: &str, why: &str) -> Bad {
    bad(g, path, format!("is not supported by this service: {why}"))
}

/// The values of LUCI's enums, by number: protobuf text takes an enum value as its name or its
/// number (`day: 1` is MONDAY).
const DAYS: &[&str] = &[
    "DAY_OF_WEEK_UNSPECIFIED",
    "MONDAY",
    "TUESDAY",
    "WEDNESDAY",
    "THURSDAY",
    "FRIDAY",
    "SATURDAY",
    "SUNDAY",
];
const INTERFACES: &[&str] = &["SCSI", "NVME"];
const OPERATORS: &[&str] = &["OPERATOR_UNSPECIFIED", "IN", "NOT_IN"];
const CHANNELS: &[&str] =
    &["GCP_CHANNEL_UNSPECIFIED", "GCP_CHANNEL_STABLE", "GCP_CHANNEL_BETA", "GCP_CHANNEL_ALPHA"];
const ACCESS_CONFIGS: &[&str] = &["ONE_TO_ONE_NAT"];
const MONITORING_UNITS: &[&str] =
    &["PERFORMANCE_MONITORING_UNIT_UNSPECIFIED", "ARCHITECTURAL", "ENHANCED", "STANDARD"];

/// A value of the enum whose values are `names` (by number): its name, or its number.
fn enumerated(g: &Field, path: &str, names: &[&str]) -> R<String> {
    match &g.value {
        Value::Num(n) => {
            n.parse::<usize>().ok().and_then(|i| names.get(i)).map(|s| (*s).to_owned()).ok_or_else(|| {
                bad(
                    g,
                    path,
                    format!("must be one of {} (or its number, 0 to {})", names.join(", "), names.len() - 1),
                )
            })
        }
        _ => name(g, path),
    }
}

fn weekday(g: &Field, path: &str) -> R<Day> {
    Day::from_name(&enumerated(g, path, DAYS)?)
        .ok_or_else(|| bad(g, path, "must be a day name, MONDAY to SUNDAY"))
}

/// The reader of one block: what it has found so far.
#[derive(Default)]
struct Cx(RefCell<Gathered>);

impl Cx {
    fn mistake(&self, b: Bad) {
        self.0.borrow_mut().bad.push(b);
    }

    /// Each field of one message, its line recorded under its path; a singular field set twice,
    /// and every error `f` returns, is a mistake, and the next field is read.
    fn fields<'a>(&self, body: &'a [Field], path: &str, mut f: impl FnMut(&'a Field, String) -> R<()>) {
        let mut seen = HashSet::new();
        let mut index = HashMap::<&str, usize>::new();
        for g in body {
            let at = |p: &str| if path.is_empty() { p.to_owned() } else { format!("{path}.{p}") };
            let sub = match REPEATED.contains(&g.name.as_str()) {
                true => {
                    let i = index.entry(&g.name).or_default();
                    *i += 1;
                    format!("{}[{}]", at(&g.name), *i - 1)
                }
                false if !seen.insert(g.name.as_str()) => {
                    self.mistake(bad(g, &at(&g.name), "is set twice; it is not a repeated field"));
                    continue;
                }
                false => at(&g.name),
            };
            self.0.borrow_mut().lines.push((sub.clone(), g.line));
            if let Err(b) = f(g, sub) {
                self.mistake(b);
            }
        }
    }

    fn config(&self, body: &[Field], line: u32) -> Config {
        let mut c = Config::default();
        self.fields(body, "", |g, p| {
            match g.name.as_str() {
                "prefix" => c.prefix = string(g, &p)?,
                "amount" => c.amount = self.amount(msg(g, &p)?, &p),
                "attributes" => c.attributes = self.attributes(msg(g, &p)?, &p),
                "lifetime" => c.lifetime = self.period(msg(g, &p)?, &p),
                "timeout" => c.timeout = self.period(msg(g, &p)?, &p),
                "swarming" => c.swarming = string(g, &p)?,
                "owner" => c.owner.push(string(g, &p)?),
                "revision" if string(g, &p)?.is_empty() => {}
                "revision" => return Err(bad(g, &p, "is set by the server: leave it out")),
                "current_amount" if uint(g, &p)? == 0 => {}
                "current_amount" => {
                    return Err(bad(g, &p, "is set by the server: set it with `configs amount` instead"));
                }
                "duts" => return Err(refuse(g, &p, "one VM per DUT (CloudBots) is not implemented")),
                "swarming_pools" => return Err(refuse(g, &p, "it is informational in LUCI; remove it")),
                "kind" => return Err(refuse(g, &p, "kinds were removed from LUCI's schema")),
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        });
        // Not written, or written empty (proto3's "not set"); one written wrong is said already.
        let said = self.0.borrow().bad.iter().any(|b| b.path == "swarming");
        if c.swarming.is_empty() && !said {
            self.mistake(Bad { line, path: "swarming".into(), rule: NO_SWARMING.into() });
        }
        c
    }

    fn amount(&self, body: &[Field], path: &str) -> Amount {
        let mut a = Amount::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "min" => a.min = u32v(g, &p)?,
                "max" => a.max = u32v(g, &p)?,
                "change" => a.change.push(self.schedule(g, msg(g, &p)?, &p)),
                "default" => {
                    return Err(refuse(
                        g,
                        &p,
                        "a fixed amount is reserved in LUCI's schema: use min and max",
                    ));
                }
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        });
        a
    }

    /// A weekly window; one with no start (or no day) stands with a start no rule takes (no time),
    /// so the windows after it keep their index.
    fn schedule(&self, at: &Field, body: &[Field], path: &str) -> Schedule {
        let (mut start, mut length, mut min, mut max) = (None, Secs(0), 0, 0);
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "start" => start = Some(self.time_of_day(g, msg(g, &p)?, &p)),
                "length" => length = self.period(msg(g, &p)?, &p),
                "min" => min = u32v(g, &p)?,
                "max" => max = u32v(g, &p)?,
                "amount" => return Err(refuse(g, &p, "the old fixed amount of a schedule: use min and max")),
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        });
        let start = start.flatten().unwrap_or_else(|| {
            let p = format!("{path}.start");
            if !self.0.borrow().bad.iter().any(|b| b.path.starts_with(&p)) {
                self.mistake(Bad { line: at.line, path: p.clone(), rule: "is required".into() });
            }
            self.0.borrow_mut().unread.push(p);
            TimeOfDay {
                unknown: Default::default(),
                day: Day::Monday,
                time: String::new(),
                location: String::new(),
            }
        });
        Schedule { unknown: Default::default(), start, length, min, max }
    }

    /// A start; `None` (a mistake said) when it names no day.
    fn time_of_day(&self, at: &Field, body: &[Field], path: &str) -> Option<TimeOfDay> {
        let (mut day, mut time, mut location) = (None, String::new(), String::new());
        let mut day_written = false;
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "day" => {
                    day_written = true;
                    day = Some(weekday(g, &p)?);
                }
                "time" => time = string(g, &p)?,
                "location" => location = string(g, &p)?,
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        });
        if !day_written {
            self.mistake(Bad { line: at.line, path: format!("{path}.day"), rule: "is required".into() });
        }
        Some(TimeOfDay { unknown: Default::default(), day: day?, time, location })
    }

    fn attributes(&self, body: &[Field], path: &str) -> Attributes {
        let mut a = Attributes::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "disk" => a.disk.push(self.disk(msg(g, &p)?, &p)),
                "machine_type" => a.machine_type = string(g, &p)?,
                "metadata" => a.metadata.push(self.metadata(g, msg(g, &p)?, &p)),
                "min_cpu_platform" => a.min_cpu_platform = string(g, &p)?,
                "network_interface" => a.network_interface.push(self.nic(msg(g, &p)?, &p)),
                "project" => a.project = string(g, &p)?,
                "service_account" => a.service_account.push(self.account(msg(g, &p)?, &p)),
                "tag" => a.tag.push(string(g, &p)?),
                "zone" => a.zone = string(g, &p)?,
                "scheduling" => a.scheduling = Some(self.scheduling(msg(g, &p)?, &p)),
                "label" => {
                    let (k, v) = self.label(g, msg(g, &p)?, &p)?;
                    if a.label.insert(k, v).is_some() {
                        return Err(bad(g, &p, "a label key set twice"));
                    }
                }
                "disable_integrity_monitoring" => a.disable_integrity_monitoring = boolean(g, &p)?,
                "enable_secure_boot" => a.enable_secure_boot = boolean(g, &p)?,
                "disable_vtpm" => a.disable_vtpm = boolean(g, &p)?,
                "enable_confidential_compute" => a.enable_confidential_compute = boolean(g, &p)?,
                "terminate_on_maintenance" => a.terminate_on_maintenance = boolean(g, &p)?,
                "gcp_channel" => match enumerated(g, &p, CHANNELS)?.as_str() {
                    "GCP_CHANNEL_UNSPECIFIED" | "GCP_CHANNEL_STABLE" => {}
                    _ => return Err(refuse(g, &p, "this service calls the stable Compute Engine API only")),
                },
                "performance_monitoring_unit" => match enumerated(g, &p, MONITORING_UNITS)?.as_str() {
                    "PERFORMANCE_MONITORING_UNIT_UNSPECIFIED" => {}
                    _ => return Err(refuse(g, &p, "it needs the alpha Compute Engine API")),
                },
                "force_send_fields" | "null_fields" => {
                    return Err(refuse(
                        g,
                        &p,
                        "an escape hatch of LUCI's Go client; every set field is sent here",
                    ));
                }
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        });
        a
    }

    fn disk(&self, body: &[Field], path: &str) -> Disk {
        let mut d = Disk::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "image" => d.image = string(g, &p)?,
                "size" => d.size = uint(g, &p)?,
                "type" => d.kind = string(g, &p)?,
                "interface" => d.interface = enumerated(g, &p, INTERFACES)?,
                "provisioned_iops" => d.provisioned_iops = Some(uint(g, &p)?),
                "provisioned_throughput" => d.provisioned_throughput = Some(uint(g, &p)?),
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        });
        d
    }

    fn metadata(&self, at: &Field, body: &[Field], path: &str) -> Metadata {
        let mut m = Metadata::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "from_text" => m.from_text = Some(string(g, &p)?),
                "from_file" => m.from_file = Some(string(g, &p)?),
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        });
        if m.from_text.is_some() && m.from_file.is_some() {
            self.mistake(bad(at, path, "exactly one of from_text or from_file"));
        }
        m
    }

    fn nic(&self, body: &[Field], path: &str) -> NetworkInterface {
        let mut n = NetworkInterface::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "access_config" => {
                    let mut kind = "ONE_TO_ONE_NAT".to_owned();
                    self.fields(msg(g, &p)?, &p, |h, q| match h.name.as_str() {
                        "type" => {
                            kind = enumerated(h, &q, ACCESS_CONFIGS)?;
                            Ok(())
                        }
                        _ => Err(unknown(h, &q)),
                    });
                    n.access_config.push(AccessConfig { unknown: Default::default(), kind });
                }
                "network" => n.network = string(g, &p)?,
                "subnetwork" => n.subnetwork = string(g, &p)?,
                "stack_type" => n.stack_type = name(g, &p)?,
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        });
        n
    }

    fn account(&self, body: &[Field], path: &str) -> ServiceAccount {
        let mut s = ServiceAccount::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "email" => s.email = string(g, &p)?,
                "scope" => s.scope.push(string(g, &p)?),
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        });
        s
    }

    fn scheduling(&self, body: &[Field], path: &str) -> Scheduling {
        let mut s = Scheduling::default();
        self.fields(body, path, |g, p| {
            if g.name != "node_affinity" {
                return Err(unknown(g, &p));
            }
            let mut a = NodeAffinity::default();
            self.fields(msg(g, &p)?, &p, |h, q| {
                match h.name.as_str() {
                    "key" => a.key = string(h, &q)?,
                    "operator" => a.operator = enumerated(h, &q, OPERATORS)?,
                    "values" => a.values.push(string(h, &q)?),
                    _ => return Err(unknown(h, &q)),
                }
                Ok(())
            });
            s.node_affinity.push(a);
            Ok(())
        });
        s
    }

    fn label(&self, at: &Field, body: &[Field], path: &str) -> R<(String, String)> {
        let (mut k, mut v) = (None, String::new());
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "key" => k = Some(string(g, &p)?),
                "value" => v = string(g, &p)?,
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        });
        let k = k.ok_or_else(|| bad(at, path, "a label needs a key: label { key: … value: … }"))?;
        self.0
            .borrow_mut()
            .lines
            .push((format!("{}.{k}", path.rsplit_once('[').map_or(path, |(p, _)| p)), at.line));
        Ok((k, v))
    }

    /// A LUCI `TimePeriod`: `{ duration: "1d" }` or `{ seconds: 86400 }` (a duration's text is
    /// kept, for `configs convert`).
    fn period(&self, body: &[Field], path: &str) -> Secs {
        let mut out = None;
        self.fields(body, path, |g, p| {
            if out.is_some() {
                return Err(bad(g, path, "exactly one of duration or seconds"));
            }
            out = Some(match g.name.as_str() {
                "duration" => {
                    let written = string(g, &p)?;
                    let secs = Secs::parse(&written).map_err(|e| bad(g, &p, e))?;
                    self.0.borrow_mut().durations.push((path.to_owned(), written));
                    secs
                }
                "seconds" => Secs(uint(g, &p)?),
                _ => return Err(unknown(g, &p)),
            });
            Ok(())
        });
        out.unwrap_or_default()
    }
}

/// Why a `vms` block must name its Swarming server here, though LUCI's schema lets it out.
pub(super) const NO_SWARMING: &str = "is required here, though LUCI's vms.cfg may leave it out: this service \
     watches each VM's bot on its Swarming server (and tells the VM which server to join), so a pool \
     without one cannot be served; name one of the servers the settings list ([swarming] servers)";
