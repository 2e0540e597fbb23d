//! LUCI's `vms.cfg` (a `Configs` text proto of LUCI `config.proto`, luci-gce.md §2.1–2.2): each
//! `vms { … }` block read as a Config, with the lines of its fields for errors; and the way back
//! ([`to_text_proto`]). A LUCI field this service cannot honour is an error naming it and its
//! line, never dropped.

use std::collections::HashSet;
use std::ops::Range;

use super::attributes::*;
use super::spec::{Config, MAX_FILE_CONFIGS};
use super::textproto::{self, Field, Value};
use super::units::{Amount, ConfigError, Day, Schedule, Secs, TimeOfDay};

/// Where a Config of a `vms.cfg` came from: its block's line and its fields' lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The line of its `vms` block.
    pub line: u32,
    /// Its block's bytes in the file.
    pub span: Range<usize>,
    /// Field paths as validation names them (`attributes.disk[0].type`) and their lines.
    lines: Vec<(String, u32)>,
}

impl Located {
    /// The line of a field its validation names (`linux.attributes.zone`): the deepest field
    /// written that holds it, or the block's line.
    pub fn line_of(&self, prefix: &str, field: &str) -> u32 {
        let path = field.strip_prefix(prefix).and_then(|f| f.strip_prefix('.')).unwrap_or(field);
        let within =
            |p: &str| path == p || path.starts_with(&format!("{p}.")) || path.starts_with(&format!("{p}["));
        self.lines
            .iter()
            .filter(|(p, _)| within(p))
            .max_by_key(|(p, _)| p.len())
            .map_or(self.line, |(_, l)| *l)
    }

    /// The error of a prefix written in this block and in the one at line `first`.
    pub fn twice(&self, origin: &str, prefix: &str, first: u32) -> ConfigError {
        ConfigError {
            field: format!("{origin}:{}", self.line),
            rule: format!("{}: prefix also in the vms block at line {first}", block(prefix, self.line)),
        }
    }

    /// `e` (about the Config of prefix `prefix`) with the block and the field's line.
    pub fn explain(&self, origin: &str, prefix: &str, e: ConfigError) -> ConfigError {
        let line = self.line_of(prefix, &e.field);
        ConfigError { field: format!("{origin}:{line}"), rule: format!("{}: {e}", block(prefix, self.line)) }
    }
}

fn block(prefix: &str, line: u32) -> String {
    match prefix.is_empty() {
        true => format!("vms block at line {line}"),
        false => format!("vms block {prefix:?} (line {line})"),
    }
}

/// A field that cannot be read: its line, its path and why.
struct Bad(u32, String, String);

type R<T> = Result<T, Bad>;

/// Reads every `vms` block of a `vms.cfg` text; errors name `origin`, the line, and the block
/// (a prefix written twice is [`super::file::parse`]'s to find).
pub fn parse_vms(text: &str, origin: &str) -> Result<Vec<(Config, Located)>, ConfigError> {
    let at = |line: u32, rule: String| ConfigError { field: format!("{origin}:{line}"), rule };
    let fields = textproto::parse(text).map_err(|e| at(e.line, e.what))?;
    if fields.len() > MAX_FILE_CONFIGS {
        return Err(at(
            1,
            format!("holds {} blocks; at most {MAX_FILE_CONFIGS} Configs a file", fields.len()),
        ));
    }
    let mut out: Vec<(Config, Located)> = Vec::new();
    for f in &fields {
        if f.name != "vms" {
            return Err(at(
                f.line,
                format!("{} is not a field of LUCI's Configs (only vms blocks are)", f.name),
            ));
        }
        let Value::Msg(body) = &f.value else {
            return Err(at(f.line, "vms must be a message: vms { … }".into()));
        };
        let named = body.iter().find_map(|g| match (&g.name[..], &g.value) {
            ("prefix", Value::Str(s)) => Some(s.clone()),
            _ => None,
        });
        let prefix = named.unwrap_or_default();
        let cx = Cx { lines: Default::default() };
        let c = cx.config(body).map_err(|Bad(line, path, rule)| {
            at(line, format!("{}: {path}: {rule}", block(&prefix, f.line)))
        })?;
        out.push((c, Located { line: f.line, span: f.span.clone(), lines: cx.lines.into_inner() }));
    }
    if out.is_empty() {
        return Err(at(1, "holds no vms block: a Config file needs at least one".into()));
    }
    Ok(out)
}

/// What reading one block gathers: the lines of its fields.
struct Cx {
    lines: std::cell::RefCell<Vec<(String, u32)>>,
}

/// Fields of one message, each singular one at most once.
fn each<'a>(fields: &'a [Field], path: &str, mut f: impl FnMut(&'a Field, String) -> R<()>) -> R<()> {
    let mut seen = HashSet::new();
    let mut index = std::collections::HashMap::<&str, usize>::new();
    for g in fields {
        let at = |p: &str| if path.is_empty() { p.to_owned() } else { format!("{path}.{p}") };
        let sub = match REPEATED.contains(&g.name.as_str()) {
            true => {
                let i = index.entry(&g.name).or_default();
                *i += 1;
                format!("{}[{}]", at(&g.name), *i - 1)
            }
            false => {
                if !seen.insert(g.name.as_str()) {
                    return Err(Bad(g.line, at(&g.name), "is set twice; it is not a repeated field".into()));
                }
                at(&g.name)
            }
        };
        f(g, sub)?;
    }
    Ok(())
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

fn string(g: &Field, path: &str) -> R<String> {
    match &g.value {
        Value::Str(s) => Ok(s.clone()),
        _ => Err(Bad(g.line, path.into(), "must be a quoted string".into())),
    }
}

/// An enum value: a name (a quoted one is taken too).
fn name(g: &Field, path: &str) -> R<String> {
    match &g.value {
        Value::Ident(s) | Value::Str(s) => Ok(s.clone()),
        _ => Err(Bad(g.line, path.into(), "must be a name like SCSI".into())),
    }
}

fn uint(g: &Field, path: &str) -> R<u64> {
    match &g.value {
        Value::Num(n) if n.starts_with('-') => Err(Bad(g.line, path.into(), "must not be negative".into())),
        Value::Num(n) => n
            .trim_start_matches('+')
            .parse()
            .map_err(|_| Bad(g.line, path.into(), "must be a whole number".into())),
        _ => Err(Bad(g.line, path.into(), "must be a number".into())),
    }
}

fn u32v(g: &Field, path: &str) -> R<u32> {
    u32::try_from(uint(g, path)?).map_err(|_| Bad(g.line, path.into(), format!("at most {}", u32::MAX)))
}

fn boolean(g: &Field, path: &str) -> R<bool> {
    match &g.value {
        Value::Ident(s) if matches!(s.as_str(), "true" | "True" | "t") => Ok(true),
        Value::Ident(s) if matches!(s.as_str(), "false" | "False" | "f") => Ok(false),
        Value::Num(n) if n == "1" || n == "0" => Ok(n == "1"),
        _ => Err(Bad(g.line, path.into(), "must be true or false".into())),
    }
}

fn msg<'a>(g: &'a Field, path: &str) -> R<&'a [Field]> {
    match &g.value {
        Value::Msg(m) => Ok(m),
        _ => Err(Bad(g.line, path.into(), "must be a message: { … }".into())),
    }
}

fn unknown(g: &Field, path: &str) -> Bad {
    Bad(g.line, path.into(), "is not a field of LUCI's config.proto here".into())
}

fn refuse(g: &Field, path: &str, why: &str) -> Bad {
    Bad(g.line, path.into(), format!("is not supported by this service: {why}"))
}

impl Cx {
    /// [`each`] field of one message, its line recorded under its path.
    fn fields<'a>(
        &self,
        body: &'a [Field],
        path: &str,
        mut f: impl FnMut(&'a Field, String) -> R<()>,
    ) -> R<()> {
        each(body, path, |g, p| {
            self.lines.borrow_mut().push((p.clone(), g.line));
            f(g, p)
        })
    }

    fn config(&self, body: &[Field]) -> R<Config> {
        let mut c = Config::default();
        self.fields(body, "", |g, p| {
            match g.name.as_str() {
                "prefix" => c.prefix = string(g, &p)?,
                "amount" => c.amount = self.amount(msg(g, &p)?, &p)?,
                "attributes" => c.attributes = self.attributes(msg(g, &p)?, &p)?,
                "lifetime" => c.lifetime = period(msg(g, &p)?, &p)?,
                "timeout" => c.timeout = period(msg(g, &p)?, &p)?,
                "swarming" => c.swarming = string(g, &p)?,
                "owner" => c.owner.push(string(g, &p)?),
                "revision" if string(g, &p)?.is_empty() => {}
                "revision" => return Err(Bad(g.line, p, "is set by the server: leave it out".into())),
                "current_amount" if uint(g, &p)? == 0 => {}
                "current_amount" => {
                    return Err(Bad(
                        g.line,
                        p,
                        "is set by the server: set it with `configs amount` instead".into(),
                    ));
                }
                "duts" => return Err(refuse(g, &p, "one VM per DUT (CloudBots) is not implemented")),
                "swarming_pools" => return Err(refuse(g, &p, "it is informational in LUCI; remove it")),
                "kind" => return Err(refuse(g, &p, "kinds were removed from LUCI's schema")),
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        })?;
        Ok(c)
    }

    fn amount(&self, body: &[Field], path: &str) -> R<Amount> {
        let mut a = Amount::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "min" => a.min = u32v(g, &p)?,
                "max" => a.max = u32v(g, &p)?,
                "change" => a.change.push(self.schedule(g, msg(g, &p)?, &p)?),
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
        })?;
        Ok(a)
    }

    fn schedule(&self, at: &Field, body: &[Field], path: &str) -> R<Schedule> {
        let (mut start, mut length, mut min, mut max) = (None, Secs(0), 0, 0);
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "start" => start = Some(self.time_of_day(g, msg(g, &p)?, &p)?),
                "length" => length = period(msg(g, &p)?, &p)?,
                "min" => min = u32v(g, &p)?,
                "max" => max = u32v(g, &p)?,
                "amount" => return Err(refuse(g, &p, "the old fixed amount of a schedule: use min and max")),
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        })?;
        let start = start.ok_or_else(|| Bad(at.line, format!("{path}.start"), "is required".into()))?;
        Ok(Schedule { unknown: Default::default(), start, length, min, max })
    }

    fn time_of_day(&self, at: &Field, body: &[Field], path: &str) -> R<TimeOfDay> {
        let (mut day, mut time, mut location) = (None, String::new(), String::new());
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "day" => day = Some(weekday(g, &p)?),
                "time" => time = string(g, &p)?,
                "location" => location = string(g, &p)?,
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        })?;
        let day = day.ok_or_else(|| Bad(at.line, format!("{path}.day"), "is required".into()))?;
        Ok(TimeOfDay { unknown: Default::default(), day, time, location })
    }

    fn attributes(&self, body: &[Field], path: &str) -> R<Attributes> {
        let mut a = Attributes::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "disk" => a.disk.push(self.disk(msg(g, &p)?, &p)?),
                "machine_type" => a.machine_type = string(g, &p)?,
                "metadata" => a.metadata.push(self.metadata(g, msg(g, &p)?, &p)?),
                "min_cpu_platform" => a.min_cpu_platform = string(g, &p)?,
                "network_interface" => a.network_interface.push(self.nic(msg(g, &p)?, &p)?),
                "project" => a.project = string(g, &p)?,
                "service_account" => a.service_account.push(self.account(msg(g, &p)?, &p)?),
                "tag" => a.tag.push(string(g, &p)?),
                "zone" => a.zone = string(g, &p)?,
                "scheduling" => a.scheduling = Some(self.scheduling(msg(g, &p)?, &p)?),
                "label" => {
                    let (k, v) = self.label(g, msg(g, &p)?, &p)?;
                    if a.label.insert(k, v).is_some() {
                        return Err(Bad(g.line, p, "a label key set twice".into()));
                    }
                }
                "disable_integrity_monitoring" => a.disable_integrity_monitoring = boolean(g, &p)?,
                "enable_secure_boot" => a.enable_secure_boot = boolean(g, &p)?,
                "disable_vtpm" => a.disable_vtpm = boolean(g, &p)?,
                "enable_confidential_compute" => a.enable_confidential_compute = boolean(g, &p)?,
                "terminate_on_maintenance" => a.terminate_on_maintenance = boolean(g, &p)?,
                "gcp_channel" => match name(g, &p)?.as_str() {
                    "GCP_CHANNEL_UNSPECIFIED" | "GCP_CHANNEL_STABLE" => {}
                    _ => return Err(refuse(g, &p, "this service calls the stable Compute Engine API only")),
                },
                "performance_monitoring_unit" => {
                    return Err(refuse(g, &p, "it needs the alpha Compute Engine API"));
                }
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
        })?;
        Ok(a)
    }

    fn disk(&self, body: &[Field], path: &str) -> R<Disk> {
        let mut d = Disk::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "image" => d.image = string(g, &p)?,
                "size" => d.size = uint(g, &p)?,
                "type" => d.kind = string(g, &p)?,
                "interface" => d.interface = name(g, &p)?,
                "provisioned_iops" => d.provisioned_iops = Some(uint(g, &p)?),
                "provisioned_throughput" => d.provisioned_throughput = Some(uint(g, &p)?),
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        })?;
        Ok(d)
    }

    fn metadata(&self, at: &Field, body: &[Field], path: &str) -> R<Metadata> {
        let mut m = Metadata::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "from_text" => m.from_text = Some(string(g, &p)?),
                "from_file" => m.from_file = Some(string(g, &p)?),
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        })?;
        if m.from_text.is_some() && m.from_file.is_some() {
            return Err(Bad(at.line, path.into(), "exactly one of from_text or from_file".into()));
        }
        Ok(m)
    }

    fn nic(&self, body: &[Field], path: &str) -> R<NetworkInterface> {
        let mut n = NetworkInterface::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "access_config" => {
                    let mut kind = "ONE_TO_ONE_NAT".to_owned();
                    each(msg(g, &p)?, &p, |h, q| match h.name.as_str() {
                        "type" => {
                            kind = name(h, &q)?;
                            Ok(())
                        }
                        _ => Err(unknown(h, &q)),
                    })?;
                    n.access_config.push(AccessConfig { unknown: Default::default(), kind });
                }
                "network" => n.network = string(g, &p)?,
                "subnetwork" => n.subnetwork = string(g, &p)?,
                "stack_type" => n.stack_type = name(g, &p)?,
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        })?;
        Ok(n)
    }

    fn account(&self, body: &[Field], path: &str) -> R<ServiceAccount> {
        let mut s = ServiceAccount::default();
        self.fields(body, path, |g, p| {
            match g.name.as_str() {
                "email" => s.email = string(g, &p)?,
                "scope" => s.scope.push(string(g, &p)?),
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        })?;
        Ok(s)
    }

    fn scheduling(&self, body: &[Field], path: &str) -> R<Scheduling> {
        let mut s = Scheduling::default();
        self.fields(body, path, |g, p| {
            if g.name != "node_affinity" {
                return Err(unknown(g, &p));
            }
            let mut a = NodeAffinity::default();
            each(msg(g, &p)?, &p, |h, q| {
                match h.name.as_str() {
                    "key" => a.key = string(h, &q)?,
                    "operator" => a.operator = name(h, &q)?,
                    "values" => a.values.push(string(h, &q)?),
                    _ => return Err(unknown(h, &q)),
                }
                Ok(())
            })?;
            s.node_affinity.push(a);
            Ok(())
        })?;
        Ok(s)
    }

    fn label(&self, at: &Field, body: &[Field], path: &str) -> R<(String, String)> {
        let (mut k, mut v) = (None, String::new());
        each(body, path, |g, p| {
            match g.name.as_str() {
                "key" => k = Some(string(g, &p)?),
                "value" => v = string(g, &p)?,
                _ => return Err(unknown(g, &p)),
            }
            Ok(())
        })?;
        let k = k.ok_or_else(|| {
            Bad(at.line, path.into(), "a label needs a key: label { key: … value: … }".into())
        })?;
        self.lines
            .borrow_mut()
            .push((format!("{}.{k}", path.rsplit_once('[').map_or(path, |(p, _)| p)), at.line));
        Ok((k, v))
    }
}

/// A LUCI `TimePeriod`: `{ duration: "1d" }` or `{ seconds: 86400 }`.
fn period(body: &[Field], path: &str) -> R<Secs> {
    let mut out = None;
    each(body, path, |g, p| {
        if out.is_some() {
            return Err(Bad(g.line, path.into(), "exactly one of duration or seconds".into()));
        }
        out = Some(match g.name.as_str() {
            "duration" => Secs::parse(&string(g, &p)?).map_err(|e| Bad(g.line, p.clone(), e))?,
            "seconds" => Secs(uint(g, &p)?),
            _ => return Err(unknown(g, &p)),
        });
        Ok(())
    })?;
    Ok(out.unwrap_or_default())
}

fn weekday(g: &Field, path: &str) -> R<Day> {
    Day::from_name(&name(g, path)?)
        .ok_or_else(|| Bad(g.line, path.into(), "must be a day name, MONDAY to SUNDAY".into()))
}

mod write;
pub use write::to_text_proto;

#[cfg(test)]
pub(crate) mod tests;
