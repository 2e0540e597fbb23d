//! A bulkInsert's body (`BulkInsertInstanceResource`) read and checked as Compute Engine checks
//! it, into a [`BulkRequest`]: `count` and `minCount` (int64s, as strings or numbers), the names
//! (`namePattern` or `perInstanceProperties`), the template and `instanceProperties`, the
//! `locationPolicy` and the ranked `instanceFlexibilityPolicy`. What needs the world (zones of
//! the region, names in use, the template) is checked by the world.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::names::{valid_hostname, valid_name};

/// Most instances one bulkInsert makes.
pub const MAX_COUNT: u64 = 5000;
/// Most `#` in a `namePattern`.
pub const MAX_PATTERN_DIGITS: usize = 18;

/// How the instances are named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Names {
    /// `namePattern`: `prefix`, `width` digits, `suffix` (`ci-####-x` → `ci-0001-x`, ...).
    Pattern {
        /// Before the digits.
        prefix: String,
        /// Number of digits (the run of `#`).
        width: usize,
        /// After the digits.
        suffix: String,
    },
    /// `perInstanceProperties`: the names (in name order) and their hostnames.
    Listed(Vec<(String, Option<String>)>),
}

impl Names {
    /// The `n`th name of a pattern (`n` ≥ 1).
    pub fn numbered(prefix: &str, width: usize, suffix: &str, n: u64) -> String {
        format!("{prefix}{n:0width$}{suffix}")
    }
}

/// Where the instances go (`locationPolicy.targetShape`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// All in one zone (the default).
    AnySingleZone,
    /// Spread evenly over the zones that have room.
    Balanced,
    /// Any zones: each instance in the first that has room.
    Any,
}

/// `locationPolicy`: zones named (`zones[]`), allowed and denied (`locations`), caps, shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationPolicy {
    /// `zones[].zone`, when given: only these.
    pub zones: Option<Vec<String>>,
    /// `locations` with preference ALLOW: when any, only these.
    pub allow: BTreeSet<String>,
    /// `locations` with preference DENY: never these.
    pub deny: BTreeSet<String>,
    /// `locations[..].constraints.maxCount`: most instances in a zone.
    pub max_count: BTreeMap<String, u64>,
    /// `targetShape`.
    pub shape: Shape,
}

/// One machine type to try, in the order of preference (`instanceSelections` by rank).
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// `rank` of its selection (0 when not given).
    pub rank: i64,
    /// Machine type name.
    pub machine_type: String,
    /// The selection's `disks`, replacing the properties' ones.
    pub disks: Option<Value>,
    /// The selection's `minCpuPlatform`.
    pub min_cpu_platform: Option<String>,
}

/// A checked bulkInsert body.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkRequest {
    /// Most instances to make (1 to [`MAX_COUNT`]).
    pub count: u64,
    /// Fewest: below it, none are kept (1 to `count`; `count` when not given).
    pub min_count: u64,
    /// Their names.
    pub names: Names,
    /// `sourceInstanceTemplate`: the template's name.
    pub template: Option<String>,
    /// `instanceProperties` (an object; `{}` when not given), over the template's.
    pub properties: Value,
    /// Zone choice.
    pub policy: LocationPolicy,
    /// Machine types by preference (`instanceFlexibilityPolicy`); empty: the properties' own.
    pub choices: Vec<Choice>,
}

fn invalid(field: &str, value: impl std::fmt::Display, why: &str) -> String {
    format!("Invalid value for field 'resource.{field}': '{value}'. {why}")
}

/// An int64 given as a string or a number.
fn int64(v: &Value, field: &str) -> Result<Option<i64>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => n.as_i64().map(Some).ok_or_else(|| invalid(field, n, "Expected an int64.")),
        Value::String(s) => s.trim().parse().map(Some).map_err(|_| invalid(field, s, "Expected an int64.")),
        other => Err(invalid(field, other, "Expected an int64.")),
    }
}

/// A zone as `locationPolicy` names it (`zones/us-central1-a`, or a URL ending so): its name.
fn zone_of(field: &str, s: &str) -> Result<String, String> {
    let zone = s.rsplit_once("zones/").map(|(_, z)| z).unwrap_or_default();
    if valid_name(zone) && zone.contains('-') {
        Ok(zone.to_owned())
    } else {
        Err(invalid(field, s, "Expected a zone like zones/us-central1-a."))
    }
}

impl BulkRequest {
    /// Reads and checks a `BulkInsertInstanceResource`; the error is Compute's message.
    pub fn parse(body: &Value) -> Result<Self, String> {
        let Some(obj) = body.as_object() else {
            return Err("Invalid JSON payload: expected an object.".into());
        };
        let null = Value::Null;
        let field = |k: &str| obj.get(k).unwrap_or(&null);
        let count = int64(field("count"), "count")?
            .ok_or("Required field 'resource.count' not specified. It must be between 1 and 5000.")?;
        if !(1..=MAX_COUNT as i64).contains(&count) {
            return Err(invalid("count", count, "It must be between 1 and 5000."));
        }
        let min_count = int64(field("minCount"), "minCount")?.unwrap_or(count);
        if !(1..=count).contains(&min_count) {
            return Err(invalid("minCount", min_count, "It must be between 1 and count."));
        }
        let (count, min_count) = (count as u64, min_count as u64);
        let names = names(field("namePattern"), field("perInstanceProperties"), count)?;
        let template = match field("sourceInstanceTemplate") {
            Value::Null => None,
            Value::String(s) => Some(template_name(s)?),
            other => return Err(invalid("sourceInstanceTemplate", other, "Expected a template URL.")),
        };
        let properties = match field("instanceProperties") {
            Value::Null if template.is_none() => {
                return Err("Required field 'resource.instanceProperties' not specified (nor sourceInstanceTemplate).".into());
            }
            Value::Null => Value::Object(Default::default()),
            v @ Value::Object(_) => v.clone(),
            other => return Err(invalid("instanceProperties", other, "Expected an object.")),
        };
        Ok(Self {
            count,
            min_count,
            names,
            template,
            properties,
            policy: location_policy(field("locationPolicy"))?,
            choices: choices(field("instanceFlexibilityPolicy"))?,
        })
    }
}

/// `global/instanceTemplates/<name>`, partial or a full URL: the name.
fn template_name(s: &str) -> Result<String, String> {
    match s.rsplit_once("global/instanceTemplates/") {
        Some((_, n)) if valid_name(n) => Ok(n.to_owned()),
        _ => Err(invalid(
            "sourceInstanceTemplate",
            s,
            "Expected a global instance template: global/instanceTemplates/<name>.",
        )),
    }
}

fn names(pattern: &Value, per_instance: &Value, count: u64) -> Result<Names, String> {
    let listed = match per_instance {
        Value::Null => None,
        Value::Object(m) if m.is_empty() => None,
        Value::Object(m) => Some(m),
        other => return Err(invalid("perInstanceProperties", other, "Expected a map of names.")),
    };
    match (pattern, listed) {
        (Value::Null, None) => Err(
            "Invalid value for field 'resource': one of namePattern or perInstanceProperties is required."
                .into(),
        ),
        (Value::Null, Some(m)) => {
            if count > m.len() as u64 {
                let why = format!("count ({count}) must not exceed the number of perInstanceProperties.");
                return Err(invalid("count", count, &why));
            }
            let mut out = Vec::new();
            for (name, props) in m.iter().take(count as usize) {
                if !valid_name(name) {
                    return Err(invalid("perInstanceProperties", name, "Must be a valid instance name."));
                }
                let hostname = match props.get("hostname") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(h)) if valid_hostname(h) => Some(h.clone()),
                    Some(h) => {
                        return Err(invalid(
                            &format!("perInstanceProperties.{name}.hostname"),
                            h,
                            "Not a hostname.",
                        ));
                    }
                };
                out.push((name.clone(), hostname));
            }
            Ok(Names::Listed(out))
        }
        (Value::String(p), None) => {
            let Some(start) = p.find('#') else {
                return Err(invalid("namePattern", p, "It must hold one run of '#'."));
            };
            let width = p[start..].bytes().take_while(|b| *b == b'#').count();
            let (prefix, suffix) = (&p[..start], &p[start + width..]);
            if suffix.contains('#') || width > MAX_PATTERN_DIGITS {
                return Err(invalid("namePattern", p, "It must hold one run of at most 18 '#'."));
            }
            if !valid_name(&Names::numbered(prefix, width, suffix, 0)) {
                return Err(invalid("namePattern", p, "Its names must be valid instance names."));
            }
            if count > 10u64.pow(width as u32) - 1 {
                return Err(invalid("namePattern", p, "It has fewer names than count."));
            }
            Ok(Names::Pattern { prefix: prefix.to_owned(), width, suffix: suffix.to_owned() })
        }
        (Value::String(_), Some(_)) => {
            Err("Invalid value for field 'resource': give namePattern or perInstanceProperties, not both."
                .into())
        }
        (other, _) => Err(invalid("namePattern", other, "Expected a string.")),
    }
}

fn location_policy(v: &Value) -> Result<LocationPolicy, String> {
    let mut p = LocationPolicy {
        zones: None,
        allow: BTreeSet::new(),
        deny: BTreeSet::new(),
        max_count: BTreeMap::new(),
        shape: Shape::AnySingleZone,
    };
    let Some(obj) = v.as_object() else {
        return if v.is_null() { Ok(p) } else { Err(invalid("locationPolicy", v, "Expected an object.")) };
    };
    p.shape = match obj.get("targetShape").and_then(Value::as_str) {
        None | Some("ANY_SINGLE_ZONE") | Some("TARGET_SHAPE_UNSPECIFIED") => Shape::AnySingleZone,
        Some("BALANCED") => Shape::Balanced,
        Some("ANY") => Shape::Any,
        Some(other) => {
            return Err(invalid(
                "locationPolicy.targetShape",
                other,
                "Use ANY_SINGLE_ZONE, BALANCED or ANY.",
            ));
        }
    };
    if let Some(zones) = obj.get("zones") {
        let list =
            zones.as_array().ok_or_else(|| invalid("locationPolicy.zones", zones, "Expected a list."))?;
        let mut out = Vec::new();
        for z in list {
            let s = z.get("zone").and_then(Value::as_str).unwrap_or_default();
            out.push(zone_of("locationPolicy.zones.zone", s)?);
        }
        p.zones = Some(out);
    }
    for (key, loc) in obj.get("locations").and_then(Value::as_object).into_iter().flatten() {
        let zone = zone_of("locationPolicy.locations", key)?;
        match loc.get("preference").and_then(Value::as_str) {
            Some("ALLOW") => {
                p.allow.insert(zone.clone());
            }
            Some("DENY") => {
                p.deny.insert(zone.clone());
            }
            None | Some("PREFERENCE_UNSPECIFIED") => {}
            Some(other) => {
                let field = format!("locationPolicy.locations.{key}.preference");
                return Err(invalid(&field, other, "Use ALLOW or DENY."));
            }
        }
        let field = format!("locationPolicy.locations.{key}.constraints.maxCount");
        if let Some(n) = int64(loc.pointer("/constraints/maxCount").unwrap_or(&Value::Null), &field)? {
            let n = u64::try_from(n).map_err(|_| invalid(&field, n, "It must not be negative."))?;
            p.max_count.insert(zone, n);
        }
    }
    Ok(p)
}

fn choices(v: &Value) -> Result<Vec<Choice>, String> {
    let selections = match v.get("instanceSelections") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(invalid("instanceFlexibilityPolicy.instanceSelections", other, "Expected a map."));
        }
    };
    let mut ranked = Vec::new();
    for (name, sel) in selections {
        let field = format!("instanceFlexibilityPolicy.instanceSelections.{name}");
        let rank = int64(sel.get("rank").unwrap_or(&Value::Null), &format!("{field}.rank"))?.unwrap_or(0);
        let types = sel.get("machineTypes").and_then(Value::as_array).filter(|t| !t.is_empty());
        let Some(types) = types else {
            return Err(invalid(&format!("{field}.machineTypes"), "[]", "At least one machine type."));
        };
        for t in types {
            let t = t.as_str().unwrap_or_default();
            let machine = t.rsplit('/').next().unwrap_or(t);
            if !valid_name(machine) {
                return Err(invalid(&format!("{field}.machineTypes"), t, "Not a machine type."));
            }
            ranked.push((
                (rank, name.clone()),
                Choice {
                    rank,
                    machine_type: machine.to_owned(),
                    disks: sel.get("disks").cloned(),
                    min_cpu_platform: sel.get("minCpuPlatform").and_then(Value::as_str).map(str::to_owned),
                },
            ));
        }
    }
    // By rank, then selection name; a selection's machine types in their order (stable sort).
    ranked.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(ranked.into_iter().map(|(_, c)| c).collect())
}

#[cfg(test)]
mod tests;
